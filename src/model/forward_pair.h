/* Both signs of a ZO step through a layer in lockstep (issue 31): each op runs for the +eps
 * stream, then the -eps one, and each weight matrix's GEMMs of both signs run as one
 * matmul_pair from the masters theta, which perturbs (and first updates) theta inside the
 * GEMM's packing: the matrices' working copies w+ / w- are never written. Norms and biases
 * still come from the working copies. The same bits as two dz_forward_layer calls on
 * working copies the pipeline filled (the ops are the same, per row and per stream). */
#ifndef DZ_MODEL_FORWARD_PAIR_H
#define DZ_MODEL_FORWARD_PAIR_H

#include "backend/gemm.h"
#include "distzo/model.h"

/* The layer roles whose tensors only a GEMM reads (their spans the pair's packing perturbs). */
enum { DZ_PAIR_MATRICES = 7 };
static const int dz_pair_matrix_roles[DZ_PAIR_MATRICES] = {DZ_L_WQ, DZ_L_WK, DZ_L_WV, DZ_L_WO,
                                                           DZ_L_W_UP, DZ_L_W_GATE, DZ_L_W_DOWN};

/* A layer's matrices for the pair: theta[role] (NULL: the role is absent) with the
 * perturbation pt[role] its GEMMs apply; upd[role] holds what pt[role].upd points at. */
typedef struct dz_layer_pair_mats {
    float *theta[DZ_L_COUNT];
    dz_gemm_perturb pt[DZ_L_COUNT];
    dz_zo_update upd[DZ_L_COUNT];
} dz_layer_pair_mats;

/* f can run the pair: its backend has matmul_pair, no adapter or prefix is attached, it
 * has two streams. */
int dz_forward_pair_supported(const dz_forward *f);
/* The second stream's per-layer scratch, allocated on the first call (counted in
 * dz_forward_bytes). */
dz_status dz_forward_pair_reserve(dz_forward *f, dz_error *err);
/* Layer l on streams s[0] (+eps: t[0], theta + eps z) and s[1] (-eps: t[1], theta - eps
 * z), the matrices from mats (t's matrix roles are not read). After
 * dz_forward_pair_reserve. */
void dz_forward_layer_pair(dz_forward *f, const int s[2], int l, const float *const t[2][DZ_L_COUNT],
                           const dz_layer_pair_mats *mats);

#endif
