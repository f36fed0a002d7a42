/* ggml tensor types as GGUF files store them: block sizes and byte sizes of every type a
 * GGUF file may hold, quantization into the few types distzo writes, and dequantization into fp32 of the ones distzo reads (F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K). The block layouts
 * and the arithmetic follow ggml's reference (ggml-common.h block structs,
 * ggml-quants.c dequantize_row_*), operation for operation, so values are bit-exact. */
#ifndef DZ_FORMAT_GGML_QUANT_H
#define DZ_FORMAT_GGML_QUANT_H

#include <stddef.h>
#include <stdint.h>

typedef enum dz_ggml_type {
    DZ_GGML_F32 = 0, DZ_GGML_F16 = 1, DZ_GGML_Q4_0 = 2, DZ_GGML_Q4_1 = 3,
    DZ_GGML_Q5_0 = 6, DZ_GGML_Q5_1 = 7, DZ_GGML_Q8_0 = 8, DZ_GGML_Q8_1 = 9,
    DZ_GGML_Q2_K = 10, DZ_GGML_Q3_K = 11, DZ_GGML_Q4_K = 12, DZ_GGML_Q5_K = 13,
    DZ_GGML_Q6_K = 14, DZ_GGML_Q8_K = 15,
    DZ_GGML_I8 = 24, DZ_GGML_I16 = 25, DZ_GGML_I32 = 26, DZ_GGML_I64 = 27, DZ_GGML_F64 = 28,
    DZ_GGML_BF16 = 30,
} dz_ggml_type;

typedef struct dz_ggml_type_info {
    const char *name;   /* ggml's spelling: "F32", "Q4_1", "Q6_K", ... */
    int block;          /* elements per block (1 for plain types) */
    int block_bytes;    /* bytes per block; 0: a type whose layout distzo does not know */
    int dequantizable;  /* dz_ggml_dequantize handles it */
} dz_ggml_type_info;

/* The type's description; name "unknown" and block_bytes 0 for an id ggml does not
 * define (or a type, such as the IQ family, whose size distzo does not carry). */
dz_ggml_type_info dz_ggml_type_describe(uint32_t type);

/* dst[0..n) = the n elements at src, which is n / block whole blocks of a dequantizable
 * type (n a multiple of the block size; src may be unaligned). */
void dz_ggml_dequantize(uint32_t type, const void *src, float *dst, size_t n);

/* 1 for the types dz_ggml_quantize writes: F32, F16, BF16, Q8_0. */
int dz_ggml_quantizable(uint32_t type);
/* dst = src[0..n) in type (n a multiple of the block; dst may be unaligned), as ggml's
 * reference writes it: F16 and BF16 rounded to nearest even (BF16 NaNs kept quiet, as
 * ggml_compute_fp32_to_bf16); Q8_0 as quantize_row_q8_0_ref: per block of 32,
 * d = amax / 127, q = roundf(x * (1/d)) (halves away from zero), d stored as fp16. */
void dz_ggml_quantize(uint32_t type, const float *src, void *dst, size_t n);

#endif
