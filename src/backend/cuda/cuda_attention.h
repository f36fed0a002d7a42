/* The CUDA backend's attention op (backend.h's `attention`, dz_attn_args) on a CUDA seam
 * and stream: one launch of the flash-style attention kernel (attention_element.h). The
 * args' per-sequence arrays (starts, lengths, row0, the slot pointers) are host memory
 * read during the call: they are gathered into a pinned host staging array and copied
 * into device memory on the stream ahead of the launch, so the caller may reuse them at
 * once. The staging (dz_cuda_attn_stage) belongs to the backend instance: sized by the
 * largest batch seen, grown (never shrunk) when a larger one comes, so the steady state
 * allocates nothing. The host side is a ring of DZ_ATTN_STAGE_SLOTS arrays, each with an
 * event recorded after its copy: a call refills a slot only once the device has taken
 * what it held, so the host may run that many attention calls (a forward's layers) ahead
 * of the GPU. One device array serves them all: the copies and the kernels reading it are
 * ordered on the one stream. Library dz_cuda_host. */
#ifndef DZ_BACKEND_CUDA_CUDA_ATTENTION_H
#define DZ_BACKEND_CUDA_CUDA_ATTENTION_H

#include "backend/backend.h"
#include "backend/cuda/cuda_seam.h"

#define DZ_ATTN_STAGE_SLOTS 4

typedef struct dz_cuda_attn_stage {
    dz_attn_seq *host; /* pinned host memory: DZ_ATTN_STAGE_SLOTS arrays of cap entries */
    dz_attn_seq *dev;  /* device memory, cap entries */
    int cap, next;     /* next: the slot the next call fills */
    dz_cuda_event copied[DZ_ATTN_STAGE_SLOTS]; /* after each slot's last copy (NULL: not made yet) */
} dz_cuda_attn_stage;

/* out = attention(q) for a (backend.h) on stream st, asynchronously. Returns a
 * dz_cuda_status (the seam's last_error says what); a->scratch is not used. */
int dz_cuda_attention(dz_cuda_seam *s, dz_cuda_stream st, dz_cuda_attn_stage *stage, float *out, const float *q,
                      const dz_attn_args *a);
/* Frees the staging (waits for its copies); leaves it empty. */
void dz_cuda_attn_stage_free(dz_cuda_seam *s, dz_cuda_attn_stage *stage);

#endif
