/* Element types of stored weights. Compute is always fp32. */
#ifndef DISTZO_DTYPE_H
#define DISTZO_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dz_dtype { DZ_F32 = 0, DZ_F16, DZ_BF16 } dz_dtype;

size_t dz_dtype_size(dz_dtype t);
const char *dz_dtype_name(dz_dtype t);          /* "F32", "F16", "BF16" (safetensors spelling) */
int dz_dtype_parse(const char *s, dz_dtype *out); /* accepts F32/fp32/float32, BF16/bf16, F16/fp16; 0 on success */

float dz_bf16_to_f32(uint16_t h);
uint16_t dz_f32_to_bf16(float f); /* round to nearest even; NaN stays NaN */
float dz_f16_to_f32(uint16_t h);
uint16_t dz_f32_to_f16(float f);  /* round to nearest even */

/* dst[i] = (float)src[i] for n elements of type t. */
void dz_to_f32(float *dst, const void *src, dz_dtype t, size_t n);
/* dst (type t) = src rounded to nearest even. */
void dz_from_f32(void *dst, dz_dtype t, const float *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif
