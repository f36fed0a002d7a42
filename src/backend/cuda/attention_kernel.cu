/* The attention kernel (attention_kernel.h). Block (tile, h, b): DZ_ATTN_QUERY_TILE
 * threads, one per query row of sequence b's query tile `tile`, head h. The block walks
 * the keys its real rows see, DZ_ATTN_KEY_TILE at a time: its threads stage the tile's
 * keys and values (kv head h / group) into shared memory together, coalesced, then each
 * thread moves its own row's online softmax on over the keys it sees (every thread reads
 * the same staged element at once: a broadcast). Shared memory: the two staged tiles,
 * 2 * DZ_ATTN_KEY_TILE * head_dim floats (32 KiB at head_dim 128); the row's query and
 * accumulator are the thread's own. Nothing of size keys x queries is ever stored. */
#include "backend/cuda/attention_kernel.h"

#include <cuda_runtime.h>

/* CAP: the row arrays' size, head_dim rounded up to 64, 128 or 256 (a thread's local
 * memory is reserved for every thread the GPU can hold, so no more than the head needs). */
template <int CAP> __global__ void __launch_bounds__(DZ_ATTN_QUERY_TILE) attention_kernel(const dz_attn_launch L) {
    extern __shared__ float staged[]; /* keys, then values: DZ_ATTN_KEY_TILE rows of head_dim each */
    const dz_attn_seq s = L.seqs[blockIdx.z];
    const int tile = (int)blockIdx.x, h = (int)blockIdx.y, t = (int)threadIdx.x;
    if (tile * DZ_ATTN_QUERY_TILE >= s.rows) return; /* the whole block: past this sequence's rows */
    const int hd = L.head_dim, kvh = h / (L.n_heads / L.n_kv_heads), i = tile * DZ_ATTN_QUERY_TILE + t;
    const int nkeys = dz_attn_tile_keys(&s, tile), real = i < s.queries;
    float *kt = staged, *vt = staged + DZ_ATTN_KEY_TILE * hd;
    float q[CAP], acc[CAP];
    dz_attn_row r = {0.0f, 0.0f, q, acc};
    if (real) dz_attn_row_begin(&r, L.q + dz_attn_offset(&L, &s, i, h), hd);
    for (int k0 = 0; k0 < nkeys; k0 += DZ_ATTN_KEY_TILE) {
        for (int e = t; e < DZ_ATTN_KEY_TILE * hd; e += DZ_ATTN_QUERY_TILE)
            dz_attn_stage(kt, vt, &s, &L, kvh, k0, nkeys, e);
        __syncthreads();
        const int n = real ? dz_attn_row_keys(&s, i, k0) : 0;
        if (n > 0) dz_attn_row_tile(&r, kt, vt, n, hd, L.scale);
        __syncthreads(); /* before the next tile overwrites the staged one */
    }
    if (real) dz_attn_row_end(&r, L.out + dz_attn_offset(&L, &s, i, h), hd);
    else if (i < s.rows) /* padding */
        for (int d = 0; d < hd; d++) L.out[dz_attn_offset(&L, &s, i, h) + d] = 0.0f;
}

template <int CAP> static cudaError_t launch(const dz_attn_launch *L, cudaStream_t stream) {
    const size_t smem = 2 * sizeof(float) * DZ_ATTN_KEY_TILE * (size_t)L->head_dim;
    if (smem > 48 * 1024) { /* above the default limit of dynamic shared memory: ask for it */
        const cudaError_t e =
            cudaFuncSetAttribute(attention_kernel<CAP>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    const dim3 grid((unsigned)L->query_tiles, (unsigned)L->n_heads, (unsigned)L->batch);
    attention_kernel<CAP><<<grid, DZ_ATTN_QUERY_TILE, smem, stream>>>(*L);
    return cudaGetLastError();
}

extern "C" int dz_cuda_attention_launch(const dz_attn_launch *L, void *stream) {
    if (L->batch == 0 || L->query_tiles == 0) return (int)cudaSuccess;
    cudaStream_t st = (cudaStream_t)stream;
    return (int)(L->head_dim <= 64 ? launch<64>(L, st) : L->head_dim <= 128 ? launch<128>(L, st) : launch<256>(L, st));
}
