/* The backends built into this library, "cpu" first (the default of a forward), and the
 * instances a run creates by name (--backend). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/gpu_math.h"
#ifdef DZ_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_seam.h"
#endif

static const dz_backend *registered(int i) {
    switch (i) {
    case 0: return dz_backend_cpu();
    case 1: return dz_backend_ref();
    default: return NULL;
    }
}

int dz_backend_count(void) { return 2; }

const dz_backend *dz_backend_at(int i) { return i >= 0 && i < dz_backend_count() ? registered(i) : NULL; }

const dz_backend *dz_backend_by_name(const char *name) {
    for (int i = 0; name && i < dz_backend_count(); i++)
        if (strcmp(registered(i)->name, name) == 0) return registered(i);
    return NULL;
}

/* cuda ("cuda:MODE": --gpu-math, checked by split_math; the GPU from "@D", split_device):
 * the CUDA backend's instance on that GPU over the CUDA runtime, with -DDZ_CUDA=ON; else
 * refused, saying why: a build without CUDA, no GPU (or not that one) here, a runtime that
 * does not start. The pipeline runs on its buffers (resident mode, docs/CUDA.md). */
static dz_status cuda_create(const char *name, int device, dz_backend **out, dz_error *err) {
#ifdef DZ_HAVE_CUDA
    int status = 0;
    dz_cuda_seam *seam = dz_cuda_seam_runtime_create(device, &status);
    if (!seam && status == DZ_CUDA_ERR_NO_DEVICE)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "--backend cuda: no CUDA GPU found on this machine");
    if (!seam && status == DZ_CUDA_ERR_INVALID)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "--backend cuda: GPU %d not found: this machine shows %d "
                       "(--gpus-per-node above its GPUs?)", device, dz_cuda_gpu_count());
    if (!seam) return dz_fail(err, DZ_ERR_UNSUPPORTED, "--backend cuda: the CUDA runtime did not start (status %d)",
                              status);
    const dz_status st = dz_backend_cuda_create_on(seam, 1, out, err);
    if (st != DZ_OK) {
        seam->destroy(seam);
        return st;
    }
    const char *colon = strchr(name, ':');
    dz_gpu_math math;
    if (colon && dz_gpu_math_parse(colon + 1, &math) == 0) dz_backend_cuda_set_math(*out, math);
    return DZ_OK;
#else
    (void)name, (void)device, (void)out;
    return dz_fail(err, DZ_ERR_UNSUPPORTED, "--backend cuda: this distzo was built without CUDA (configure with "
                                            "cmake -DDZ_CUDA=ON)");
#endif
}

/* No context is made: every rank asks, and a context holds device memory. */
int dz_cuda_gpu_count(void) {
#ifdef DZ_HAVE_CUDA
    return dz_cuda_seam_runtime_devices();
#else
    return 0;
#endif
}

/* NAME (up to a ':' or '@') is a backend: an unknown one is refused as such, before the
 * mode or GPU it carries is taken for the user's --gpu-math or --gpus-per-node. */
static dz_status known_backend(const char *name, dz_error *err) {
    char base[32];
    const int len = (int)strcspn(name, ":@");
    snprintf(base, sizeof base, "%.*s", len, name);
    if ((size_t)len < sizeof base && (strcmp(base, "cuda") == 0 || dz_backend_by_name(base))) return DZ_OK;
    return dz_fail(err, DZ_ERR_INVALID, "option --backend: '%.*s' is not one of cpu, cuda, ref", len, name);
}

/* "NAME@D": GPU D (--gpus-per-node's choice), cuda's only; cut off name into base. */
static dz_status split_device(const char *name, char *base, size_t cap, int *device, dz_error *err) {
    const char *at = strrchr(name, '@');
    char *end = NULL;
    *device = 0;
    snprintf(base, cap, "%.*s", at ? (int)(at - name) : (int)strlen(name), name);
    if (!at) return DZ_OK;
    const long d = strtol(at + 1, &end, 10);
    if (end == at + 1 || *end || d < 0 || d > 1024)
        return dz_fail(err, DZ_ERR_INVALID, "--backend %s: '%s' is not a GPU number", name, at + 1);
    if (strncmp(base, "cuda", 4) != 0 || (base[4] && base[4] != ':'))
        return dz_fail(err, DZ_ERR_INVALID, "--gpus-per-node applies to --backend cuda only (not %s)", base);
    *device = (int)d;
    return DZ_OK;
}

/* "cuda:MODE" carries --gpu-math (backend/cuda/gpu_math.h): checked before anything else,
 * and only cuda takes one. */
static dz_status split_math(const char *name, char *base, size_t cap, dz_error *err) {
    const char *colon = strchr(name, ':');
    snprintf(base, cap, "%.*s", colon ? (int)(colon - name) : (int)strlen(name), name);
    dz_gpu_math math;
    if (!colon) return DZ_OK;
    if (strcmp(base, "cuda") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "--gpu-math applies to --backend cuda only (not %s)", base);
    if (dz_gpu_math_parse(colon + 1, &math) != 0)
        return dz_fail(err, DZ_ERR_INVALID, "option --gpu-math: '%s' is not one of tf32, bf16, fp32", colon + 1);
    return DZ_OK;
}

dz_status dz_backend_create(const char *name, dz_backend **out, dz_error *err) {
    *out = NULL;
    char named[96], base[32];
    int device = 0;
    dz_status st = known_backend(name ? name : "cpu", err);
    if (st == DZ_OK) st = split_device(name ? name : "cpu", named, sizeof named, &device, err);
    if (st == DZ_OK) st = split_math(named, base, sizeof base, err);
    if (st != DZ_OK) return st;
    if (strcmp(base, "cuda") == 0) return cuda_create(named, device, out, err);
    const dz_backend *be = dz_backend_by_name(name ? name : "cpu");
    if (!be) return dz_fail(err, DZ_ERR_INVALID, "option --backend: '%s' is not one of cpu, cuda, ref", name);
    /* a run on ref stands in for a device: its buffers are guarded from host code */
    if (!be->host_buffers) return dz_backend_guarded_create(be, out, err);
    *out = (dz_backend *)be; /* cpu: the one stateless instance, which free leaves */
    return DZ_OK;
}

void dz_backend_free(dz_backend *be) {
    if (be && be->ops->destroy) be->ops->destroy(be);
}
