/* SEAM_OK(seam, call): fails the cmocka test, with the seam's words, unless the CUDA seam
 * call returns DZ_CUDA_OK (tests/cuda_seam_ops.h, tests/cuda_fw_check.h). */
#ifndef DZ_TESTS_CUDA_SEAM_OK_H
#define DZ_TESTS_CUDA_SEAM_OK_H

#include "backend/cuda/cuda_seam.h"

#define SEAM_OK(s, call)                                                                         \
    do {                                                                                         \
        const int seam_st_ = (call);                                                             \
        if (seam_st_ != DZ_CUDA_OK) fail_msg("%s: status %d: %s", #call, seam_st_, (s)->last_error(s)); \
    } while (0)

#endif
