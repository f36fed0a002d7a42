/* The CUDA seam served from host memory (seam_host.h): the table, errors, and the buffer
 * table that every device pointer is checked against. */
#include "backend/cuda/seam_host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hs_fail(hs_state *h, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof h->err, fmt, ap);
    va_end(ap);
    if (status == DZ_CUDA_ERR_HAZARD) h->hazards++;
    return status;
}

uint64_t hs_checksum(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t x = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) x = (x ^ b[i]) * 0x100000001b3ull;
    return x;
}

/* The buffer holding address p, or NULL. */
static hs_alloc *find(hs_state *h, const void *p) {
    const uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < h->n_allocs; i++) {
        const uintptr_t lo = (uintptr_t)h->allocs[i].p;
        if (a >= lo && a < lo + h->allocs[i].n) return &h->allocs[i];
    }
    return NULL;
}

int hs_is_device(hs_state *h, const void *p) {
    const hs_alloc *a = find(h, p);
    return a && !a->pinned;
}

static int check_in(hs_state *h, const hs_alloc *a, const void *p, size_t bytes, const char *what) {
    const size_t off = (size_t)((const char *)p - a->p);
    if (bytes > a->n - off)
        return hs_fail(h, DZ_CUDA_ERR_OVERRUN, "%s: %zu bytes at offset %zu overrun its %zu-byte buffer", what, bytes,
                       off, a->n);
    return DZ_CUDA_OK;
}

int hs_check_device(hs_state *h, const void *p, size_t bytes, const char *what) {
    const hs_alloc *a = find(h, p);
    if (!a || a->pinned) return hs_fail(h, DZ_CUDA_ERR_MEMORY, "%s: %p is not device memory", what, p);
    return check_in(h, a, p, bytes, what);
}

/* Host memory: bounds are known (and checked) for pinned buffers only. */
int hs_check_host(hs_state *h, const void *p, size_t bytes, const char *what) {
    const hs_alloc *a = find(h, p);
    if (a && !a->pinned) return hs_fail(h, DZ_CUDA_ERR_INVALID, "%s: %p is device memory, not host memory", what, p);
    return a ? check_in(h, a, p, bytes, what) : DZ_CUDA_OK;
}

static int table_room(hs_state *h) {
    if (h->n_allocs < h->cap_allocs) return DZ_CUDA_OK;
    const size_t cap = h->cap_allocs ? 2 * h->cap_allocs : 16;
    hs_alloc *a = realloc(h->allocs, cap * sizeof *a);
    if (!a) return hs_fail(h, DZ_CUDA_ERR_MEMORY, "out of host memory for the buffer table");
    h->allocs = a, h->cap_allocs = cap;
    return DZ_CUDA_OK;
}

static int alloc_buffer(hs_state *h, void **p, size_t bytes, int pinned) {
    *p = NULL;
    if (bytes == 0) return DZ_CUDA_OK;
    if (table_room(h) != DZ_CUDA_OK) return DZ_CUDA_ERR_MEMORY;
    char *m = aligned_alloc(256, (bytes + 255) / 256 * 256); /* cudaMalloc's alignment */
    if (!m) return hs_fail(h, DZ_CUDA_ERR_MEMORY, "out of memory for %zu bytes", bytes);
    memset(m, 0xFF, bytes); /* garbage, as fresh device memory holds: NaN as floats */
    h->allocs[h->n_allocs++] = (hs_alloc){.p = m, .n = bytes, .pinned = pinned};
    *p = m;
    return DZ_CUDA_OK;
}

/* cudaFree and cudaFreeHost wait for the device first. */
static int free_buffer(hs_state *h, void *p, int pinned, const char *what) {
    if (!p) return DZ_CUDA_OK;
    const int st = hs_run_all(h);
    for (size_t i = 0; i < h->n_allocs; i++)
        if (h->allocs[i].p == p) {
            if (h->allocs[i].pinned != pinned || h->allocs[i].registered)
                return hs_fail(h, DZ_CUDA_ERR_INVALID, "%s: %p is %s memory", what, p,
                               h->allocs[i].registered ? "registered host" : pinned ? "device" : "pinned host");
            free(p);
            h->allocs[i] = h->allocs[--h->n_allocs];
            return st;
        }
    return hs_fail(h, DZ_CUDA_ERR_INVALID, "%s: %p is not the start of a buffer", what, p);
}

static int dev_alloc(dz_cuda_seam *s, void **p, size_t bytes) { return alloc_buffer(hs_of(s), p, bytes, 0); }
static int dev_free(dz_cuda_seam *s, void *p) { return free_buffer(hs_of(s), p, 0, "dev_free"); }
static int host_alloc(dz_cuda_seam *s, void **p, size_t bytes) { return alloc_buffer(hs_of(s), p, bytes, 1); }
static int host_free(dz_cuda_seam *s, void *p) { return free_buffer(hs_of(s), p, 1, "host_free"); }

/* cudaHostRegister: the range becomes a pinned buffer of the table (bounds checked) that
 * stays the caller's; a range overlapping one already known is refused, as CUDA refuses
 * memory already registered. */
static int host_register(dz_cuda_seam *s, void *p, size_t bytes) {
    hs_state *h = hs_of(s);
    if (!p || bytes == 0) return hs_fail(h, DZ_CUDA_ERR_INVALID, "host_register: %zu bytes at %p", bytes, p);
    const uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    for (size_t i = 0; i < h->n_allocs; i++) {
        const uintptr_t alo = (uintptr_t)h->allocs[i].p, ahi = alo + h->allocs[i].n;
        if (lo < ahi && alo < hi)
            return hs_fail(h, DZ_CUDA_ERR_INVALID, "host_register: %zu bytes at %p overlap a %s buffer of %zu bytes",
                           bytes, p, h->allocs[i].pinned ? "pinned" : "device", h->allocs[i].n);
    }
    if (table_room(h) != DZ_CUDA_OK) return DZ_CUDA_ERR_MEMORY;
    h->allocs[h->n_allocs++] = (hs_alloc){.p = p, .n = bytes, .pinned = 1, .registered = 1};
    return DZ_CUDA_OK;
}

/* cudaHostUnregister: the device's work is finished first (a copy still reading the block
 * must not outlive its registration). */
static int host_unregister(dz_cuda_seam *s, void *p) {
    hs_state *h = hs_of(s);
    const int st = hs_run_all(h);
    for (size_t i = 0; i < h->n_allocs; i++)
        if (h->allocs[i].p == p && h->allocs[i].registered) {
            h->allocs[i] = h->allocs[--h->n_allocs];
            return st;
        }
    return hs_fail(h, DZ_CUDA_ERR_INVALID, "host_unregister: %p is not the start of a registered range", p);
}

int dz_cuda_seam_host_pinned(const dz_cuda_seam *s, const void *p, size_t bytes) {
    const hs_alloc *a = find(s->impl, p);
    return a && a->pinned && bytes <= a->n - (size_t)((const char *)p - a->p);
}

static int device_count(dz_cuda_seam *s, int *count) {
    *count = 1; /* the host plays one device */
    return DZ_CUDA_OK;
}

static const char *last_error(dz_cuda_seam *s) { return hs_of(s)->err; }

static void destroy(dz_cuda_seam *s) {
    if (!s) return;
    hs_state *h = hs_of(s);
    hs_run_all(h);
    for (size_t i = 0; i < h->n_allocs; i++)
        if (!h->allocs[i].registered) free(h->allocs[i].p);
    for (int i = 0; i < HS_STREAMS; i++) free(h->streams[i].ops);
    free(h->allocs), free(h), free(s);
}

dz_cuda_seam *dz_cuda_seam_host_create(void) { return dz_cuda_seam_host_create_device(0); }

dz_cuda_seam *dz_cuda_seam_host_create_device(int device) {
    dz_cuda_seam *s = calloc(1, sizeof *s);
    hs_state *h = calloc(1, sizeof *h);
    if (!s || !h) {
        free(s), free(h);
        return NULL;
    }
    h->streams[0].live = 1; /* the handle NULL */
    *s = (dz_cuda_seam){.name = "host", .device = device, .impl = h, .device_count = device_count,
                        .dev_alloc = dev_alloc, .dev_free = dev_free, .host_alloc = host_alloc,
                        .host_free = host_free, .host_register = host_register,
                        .host_unregister = host_unregister, .last_error = last_error, .destroy = destroy};
    hs_stream_api(s);
    hs_ops_api(s);
    hs_forward_api(s);
    hs_attention_api(s);
    hs_nccl_api(s);
    return s;
}

int dz_cuda_seam_host_hazards(const dz_cuda_seam *s) { return ((const hs_state *)s->impl)->hazards; }

size_t dz_cuda_seam_host_copied(const dz_cuda_seam *s, dz_cuda_copy kind) {
    return ((const hs_state *)s->impl)->copied[kind];
}

int dz_cuda_seam_host_pending(const dz_cuda_seam *s, const void *p, size_t bytes) {
    const hs_state *h = s->impl;
    const uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    for (int i = 0; i < HS_STREAMS; i++) {
        const hs_stream *q = &h->streams[i];
        for (size_t k = q->done; k < q->n; k++) {
            const hs_op *op = &q->ops[k];
            if (op->kind != HS_COPY || hs_is_device((hs_state *)h, op->u.copy.dst)) continue;
            const uintptr_t dlo = (uintptr_t)op->u.copy.dst, dhi = dlo + op->u.copy.n;
            if (dlo < hi && lo < dhi) return 1;
        }
    }
    return 0;
}
