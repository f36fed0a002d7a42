/* The CUDA backend's attention op (backend.h's `attention`, dz_attn_args) on a CUDA seam
 * and stream: one launch of the flash-style attention kernel (attention_element.h). The
 * args' per-sequence arrays (starts, lengths, row0, the slot pointers) are host memory
 * read during the call: they are gathered into a pinned host staging array and copied
 * into device memory on the stream ahead of the launch, so the caller may reuse them at
 * once. The staging (dz_cuda_attn_stage) belongs to the backend instance: sized by the
 * largest batch seen, grown (never shrunk) when a larger one comes, so the steady state
 * allocates nothing; an event after each copy lets the next call refill the host array
 * only once the device has taken the last one. Library dz_cuda_host. */
#ifndef DZ_BACKEND_CUDA_CUDA_ATTENTION_H
#define DZ_BACKEND_CUDA_CUDA_ATTENTION_H

#include "backend/backend.h"
#include "backend/cuda/cuda_seam.h"

typedef struct dz_cuda_attn_stage {
    dz_attn_seq *host;    /* pinned host memory, cap entries */
    dz_attn_seq *dev;     /* device memory, cap entries */
    int cap;
    dz_cuda_event copied; /* recorded after the last copy host -> dev (NULL: none made yet) */
} dz_cuda_attn_stage;

/* out = attention(q) for a (backend.h) on stream st, asynchronously. Returns a
 * dz_cuda_status (the seam's last_error says what); a->scratch is not used. */
int dz_cuda_attention(dz_cuda_seam *s, dz_cuda_stream st, dz_cuda_attn_stage *stage, float *out, const float *q,
                      const dz_attn_args *a);
/* Frees the staging (waits for its last copy); leaves it empty. */
void dz_cuda_attn_stage_free(dz_cuda_seam *s, dz_cuda_attn_stage *stage);

#endif
