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
  # made above, before the architectures were set; its links reach dz_cuda through dz_backend
  set_target_properties(dz_cuda_host PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  find_package(CUDAToolkit REQUIRED)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  file(GLOB dz_cuda_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
  add_library(dz_cuda STATIC ${dz_cuda_srcs})
  set(dz_nvcc_werror "")
  if(DZ_WERROR)
    set(dz_nvcc_werror -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  set(dz_nvcc_exact -fmad=false -prec-div=true -prec-sqrt=true -ftz=false)
  target_compile_options(dz_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:${dz_nvcc_exact} -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-ffp-contract=off
      ${dz_nvcc_werror}>)
  target_link_libraries(dz_cuda PUBLIC dz_cuda_host CUDA::cudart CUDA::cublas CUDA::cublasLt)
  target_compile_definitions(dz_cuda PUBLIC DZ_HAVE_CUDA=1)
  # NCCL, the collectives of several GPUs (src/backend/cuda/cuda_seam_nccl.cu): beside the
  # toolkit (CUDA 13 ships it in lib/) or where the system keeps it. Without it the CUDA
  # build still builds, and the seam's collectives say that NCCL is missing.
  find_path(DZ_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(DZ_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
               ${CUDAToolkit_TARGET_DIR} PATH_SUFFIXES lib lib64)
  if(DZ_NCCL_INCLUDE_DIR AND DZ_NCCL_LIBRARY)
    message(STATUS "NCCL: ${DZ_NCCL_LIBRARY}")
    target_include_directories(dz_cuda PRIVATE ${DZ_NCCL_INCLUDE_DIR})
    target_link_libraries(dz_cuda PUBLIC ${DZ_NCCL_LIBRARY})
    target_compile_definitions(dz_cuda PRIVATE DZ_HAVE_NCCL=1)
  else()
    message(WARNING "NCCL not found: the CUDA seam's collectives (several GPUs) will report it missing")
  endif()

  # The flags are not taken on trust: the ZO kernels' PTX, made with them, must hold no
  # fused or contractible float operation (cmake/check_no_fma.sh), or dz_cuda does not build.
  set(dz_zo_ptx ${CMAKE_BINARY_DIR}/zo_kernels.ptx)
  add_custom_command(OUTPUT ${dz_zo_ptx}.checked
    COMMAND ${CMAKE_CUDA_COMPILER} -ptx -arch=compute_90 -std=c++17 -O3 ${dz_nvcc_exact}
            -I${CMAKE_SOURCE_DIR}/src -I${CMAKE_SOURCE_DIR}/include
            ${CMAKE_SOURCE_DIR}/src/backend/cuda/zo_kernels.cu -o ${dz_zo_ptx}
    COMMAND bash ${CMAKE_SOURCE_DIR}/cmake/check_no_fma.sh ${dz_zo_ptx}
    COMMAND ${CMAKE_COMMAND} -E touch ${dz_zo_ptx}.checked
    DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/zo_kernels.cu ${CMAKE_SOURCE_DIR}/src/backend/cuda/zo_kernels.h
            ${CMAKE_SOURCE_DIR}/src/backend/zo_element.h ${CMAKE_SOURCE_DIR}/src/backend/zo_ops.h
            ${CMAKE_SOURCE_DIR}/cmake/check_no_fma.sh
    COMMENT "Checking the ZO kernels' PTX for contracted float operations" VERBATIM)
  add_custom_target(dz_cuda_no_fma DEPENDS ${dz_zo_ptx}.checked)
  add_dependencies(dz_cuda dz_cuda_no_fma)
endif()
