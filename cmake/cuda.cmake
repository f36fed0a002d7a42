# CUDA (issue 33, docs/CUDA.md).
#  - dz_cuda_host, in every build: the CUDA seam (src/backend/cuda/cuda_seam.h) served from
#    host memory with a reference GEMM, which checks ordering, leading dimensions and bounds;
#    the CPU suite runs the CUDA backend's host logic through it (tests/test_cuda_seam.c).
#  - dz_cuda, with -DDZ_CUDA=ON only: the ZO kernels (src/backend/cuda/*.cu, the element code
#    of src/backend/zo_element.h) and the seam over the CUDA runtime and cuBLAS. Found with
#    CMake's CUDAToolkit; the default build needs no CUDA.
# nvcc: no contraction into FMA (-fmad=false), IEEE division and square root, no flush to
# zero, so the kernels give the CPU's bits (docs/ZO_RNG.md); every warning is an error.
option(DZ_CUDA "Build the CUDA kernels and the CUDA runtime seam (needs nvcc and cuBLAS)" OFF)

file(GLOB dz_cuda_host_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.c)
add_library(dz_cuda_host STATIC ${dz_cuda_host_srcs})
target_link_libraries(dz_cuda_host PUBLIC dz_backend)

if(DZ_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # H100 and H200 (sm_90) machine code, plus sm_90 PTX that newer GPUs compile at load.
    set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  file(GLOB dz_cuda_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
  add_library(dz_cuda STATIC ${dz_cuda_srcs})
  set(dz_nvcc_werror "")
  if(DZ_WERROR)
    set(dz_nvcc_werror -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  target_compile_options(dz_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-fmad=false -prec-div=true -prec-sqrt=true -ftz=false
      -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-ffp-contract=off ${dz_nvcc_werror}>)
  target_link_libraries(dz_cuda PUBLIC dz_cuda_host CUDA::cudart CUDA::cublas CUDA::cublasLt)
  target_compile_definitions(dz_cuda PUBLIC DZ_HAVE_CUDA=1)
endif()
