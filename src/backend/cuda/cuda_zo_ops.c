/* The CUDA backend's ZO ops (cuda_zo_ops.h): each fills one dz_zo_span and hands it to the
 * seam's zo_span. */
#include "backend/cuda/cuda_zo_ops.h"

#include <string.h>

/* The span of a pass over theta (f32 or bf16) with an optional update and pair. */
static int pass(dz_cuda_seam *s, dz_cuda_stream st, dz_zo_span *sp, const dz_zo_update *upd) {
    if (upd) { /* a q outside 1..DZ_ZO_SPAN_MAX_Q: zo_span refuses it, saying so in last_error */
        sp->has_update = 1, sp->q = upd->q, sp->lr = upd->lr, sp->wd = upd->wd, sp->step = upd->step;
        if (upd->q >= 1 && upd->q <= DZ_ZO_SPAN_MAX_Q) memcpy(sp->g, upd->g, sizeof(float) * (size_t)upd->q);
    }
    return s->zo_span(s, sp, st);
}

int dz_cuda_z_fill(dz_cuda_seam *s, dz_cuda_stream st, float *z, uint64_t seed, uint32_t tensor, uint32_t draw,
                   uint64_t i0, size_t n, dz_zdist dist) {
    const dz_zo_span sp = {.mode = DZ_SPAN_Z, .seed = seed, .tensor = tensor, .draw = draw, .dist = dist, .i0 = i0,
                           .n = n, .z = z};
    return s->zo_span(s, &sp, st);
}

int dz_cuda_philox_fill(dz_cuda_seam *s, dz_cuda_stream st, uint32_t *x, uint64_t seed, uint32_t purpose,
                        uint32_t tensor, uint32_t draw, uint64_t i0, size_t n) {
    const dz_zo_span sp = {.mode = DZ_SPAN_WORDS, .seed = seed, .tensor = tensor, .draw = draw, .purpose = purpose,
                           .i0 = i0, .n = n, .words = x};
    return s->zo_span(s, &sp, st);
}

int dz_cuda_perturb_pair(dz_cuda_seam *s, dz_cuda_stream st, const float *theta, float *w_plus, float *w_minus,
                         size_t n, float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0,
                         dz_zdist dist) {
    dz_zo_span sp = {.mode = DZ_SPAN_PASS, .seed = seed, .tensor = tensor, .draw = draw, .dist = dist, .i0 = i0,
                     .n = n, .in_f32 = theta, .w_plus = w_plus, .w_minus = w_minus, .eps = eps};
    return pass(s, st, &sp, NULL);
}

int dz_cuda_perturb_pair_bf16(dz_cuda_seam *s, dz_cuda_stream st, const uint16_t *theta, float *w_plus,
                              float *w_minus, size_t n, float eps, uint64_t seed, uint32_t tensor, uint32_t draw,
                              uint64_t i0, dz_zdist dist) {
    dz_zo_span sp = {.mode = DZ_SPAN_PASS, .seed = seed, .tensor = tensor, .draw = draw, .dist = dist, .i0 = i0,
                     .n = n, .in_bf16 = theta, .w_plus = w_plus, .w_minus = w_minus, .eps = eps};
    return pass(s, st, &sp, NULL);
}

int dz_cuda_update_f32(dz_cuda_seam *s, dz_cuda_stream st, float *theta, size_t n, const float *g, int q, float lr,
                       float wd, uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    const dz_zo_update upd = {.g = g, .q = q, .lr = lr, .wd = wd, .step = step};
    return dz_cuda_update_then_perturb_f32(s, st, theta, NULL, NULL, n, &upd, 0.0f, seed, tensor, 0, i0, dist);
}

int dz_cuda_update_bf16(dz_cuda_seam *s, dz_cuda_stream st, uint16_t *theta, size_t n, const float *g, int q,
                        float lr, float wd, uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    const dz_zo_update upd = {.g = g, .q = q, .lr = lr, .wd = wd, .step = step};
    return dz_cuda_update_then_perturb_bf16(s, st, theta, NULL, NULL, n, &upd, 0.0f, seed, tensor, 0, i0, dist);
}

int dz_cuda_update_then_perturb_f32(dz_cuda_seam *s, dz_cuda_stream st, float *theta, float *w_plus, float *w_minus,
                                    size_t n, const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                    uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    dz_zo_span sp = {.mode = DZ_SPAN_PASS, .seed = seed, .tensor = tensor, .draw = next_draw, .dist = dist, .i0 = i0,
                     .n = n, .in_f32 = theta, .out_f32 = upd ? theta : NULL, .w_plus = w_plus, .w_minus = w_minus,
                     .eps = eps};
    return pass(s, st, &sp, upd);
}

int dz_cuda_update_then_perturb_bf16(dz_cuda_seam *s, dz_cuda_stream st, uint16_t *theta, float *w_plus,
                                     float *w_minus, size_t n, const dz_zo_update *upd, float eps, uint64_t seed,
                                     uint32_t tensor, uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    dz_zo_span sp = {.mode = DZ_SPAN_PASS, .seed = seed, .tensor = tensor, .draw = next_draw, .dist = dist, .i0 = i0,
                     .n = n, .in_bf16 = theta, .out_bf16 = upd ? theta : NULL, .w_plus = w_plus, .w_minus = w_minus,
                     .eps = eps};
    return pass(s, st, &sp, upd);
}

int dz_cuda_round_bf16(dz_cuda_seam *s, dz_cuda_stream st, uint16_t *h, const float *v, size_t n, uint64_t seed,
                       uint32_t tensor, uint32_t draw, uint64_t i0) {
    const dz_zo_span sp = {.mode = DZ_SPAN_ROUND, .seed = seed, .tensor = tensor, .draw = draw, .i0 = i0, .n = n,
                           .in_f32 = v, .out_bf16 = h};
    return s->zo_span(s, &sp, st);
}
