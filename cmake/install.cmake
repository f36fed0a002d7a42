# libdistzo: the layers' libraries (dz_core ... dz_federated) as one library a program
# links, libdistzo.so and libdistzo.a, and what `cmake --install build --prefix P` puts
# under P: the two libraries, include/distzo/*.h, the distzo command, distzo.pc
# (pkg-config) and a CMake package (find_package(distzo): distzo::distzo, the shared
# library, and distzo::distzo_static).
#
# What the shared library exports: exactly the functions include/distzo/*.h declares. A
# linker version script (global: those names; local: *) generated at build time from the
# headers by cmake/public_symbols.sh, rather than a DZ_API macro on each declaration with
# -fvisibility=hidden: the headers are the API and stay plain C prototypes (no macro to
# forget on a new function, no edit to the headers other people are changing), and the
# per-layer libraries the tests link keep seeing every function. The objects are compiled
# once, position-independent (dz_layer), for both libraries.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Each layer's objects, and the external libraries the layers link (dz_layer's LIBS).
set(dz_objects "")
set(dz_external "")
foreach(line IN LISTS dz_layer_lines)
  string(REGEX MATCHALL "[^ \t#]+" words "${line}")
  list(GET words 1 folder)
  if(TARGET dz_${folder})
    list(APPEND dz_objects $<TARGET_OBJECTS:dz_${folder}>)
    get_target_property(libs dz_${folder} LINK_LIBRARIES)
    foreach(lib IN LISTS libs)
      if(NOT lib MATCHES "^dz_")
        list(APPEND dz_external ${lib})
      endif()
    endforeach()
  endif()
endforeach()
# With -DDZ_CUDA=ON dz_backend uses dz_cuda (--backend cuda looks for a GPU): the CUDA
# backend's objects and the CUDA libraries go in too.
if(DZ_CUDA)
  set_target_properties(dz_cuda_host dz_cuda PROPERTIES POSITION_INDEPENDENT_CODE ON)
  list(APPEND dz_objects $<TARGET_OBJECTS:dz_cuda_host> $<TARGET_OBJECTS:dz_cuda>)
  list(APPEND dz_external CUDA::cudart CUDA::cublas CUDA::cublasLt)
  if(DZ_NCCL_LIBRARY)
    list(APPEND dz_external ${DZ_NCCL_LIBRARY})
  endif()
endif()
list(REMOVE_DUPLICATES dz_external)

# Before 1.0 a minor version may change the ABI, so the SONAME carries MAJOR.MINOR.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(dz_soversion ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(dz_soversion ${PROJECT_VERSION_MAJOR})
endif()

add_library(distzo_static STATIC ${dz_objects})
target_link_libraries(distzo_static INTERFACE ${dz_external})
target_include_directories(distzo_static INTERFACE $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                                                   $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(distzo_static PROPERTIES OUTPUT_NAME distzo EXPORT_NAME distzo_static)

file(GLOB dz_public_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/distzo/*.h)
set(dz_symbol_map ${CMAKE_BINARY_DIR}/libdistzo.map)
add_custom_command(OUTPUT ${dz_symbol_map}
                   COMMAND bash ${CMAKE_SOURCE_DIR}/cmake/public_symbols.sh ${dz_symbol_map} ${CMAKE_C_COMPILER}
                           ${CMAKE_NM} $<TARGET_FILE:distzo_static> ${dz_public_headers}
                   DEPENDS ${CMAKE_SOURCE_DIR}/cmake/public_symbols.sh ${dz_public_headers} distzo_static
                   COMMENT "Listing the public functions of include/distzo/*.h (libdistzo.map)" VERBATIM)
add_custom_target(distzo_symbol_map DEPENDS ${dz_symbol_map})

add_library(distzo_shared SHARED ${dz_objects})
add_dependencies(distzo_shared distzo_symbol_map)
# --no-undefined: every library the objects need is linked here, none left to the program.
target_link_libraries(distzo_shared PRIVATE ${dz_external})
target_link_options(distzo_shared PRIVATE -Wl,--version-script=${dz_symbol_map} -Wl,--no-undefined)
target_include_directories(distzo_shared INTERFACE $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                                                   $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(distzo_shared PROPERTIES OUTPUT_NAME distzo EXPORT_NAME distzo VERSION ${PROJECT_VERSION}
                                               SOVERSION ${dz_soversion} LINK_DEPENDS ${dz_symbol_map})

install(TARGETS distzo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS distzo_shared distzo_static EXPORT distzoTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/distzo DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# The CMake package. distzo::distzo_static carries the layers' external libraries; the
# package's config finds them again where the program is built.
set(dz_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/distzo)
set(DZ_WITH_MPI_BUILT 0)
if(TARGET MPI::MPI_C AND "MPI::MPI_C" IN_LIST dz_external)
  set(DZ_WITH_MPI_BUILT 1)
endif()
install(EXPORT distzoTargets NAMESPACE distzo:: DESTINATION ${dz_cmake_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/distzoConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/distzoConfig.cmake INSTALL_DESTINATION ${dz_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/distzoConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/distzoConfig.cmake ${CMAKE_BINARY_DIR}/distzoConfigVersion.cmake
        DESTINATION ${dz_cmake_dir})

# distzo.pc, relocatable: its prefix is found from where the file lies (${pcfiledir}), so
# `cmake --install --prefix P` works whatever prefix the build was configured with.
set(dz_pc_requires "libcjson libmicrohttpd libcurl")
list(TRANSFORM CMAKE_DL_LIBS PREPEND "-l" OUTPUT_VARIABLE dz_dl_flags)
string(JOIN " " dz_pc_libs -lpthread -lm ${dz_dl_flags})
if(DZ_WITH_MPI_BUILT) # MPI has no one pkg-config name (ompi-c, mpich): its libraries as -L/-l
  foreach(lib IN LISTS MPI_C_LIBRARIES)
    get_filename_component(dir ${lib} DIRECTORY)
    get_filename_component(name ${lib} NAME_WE)
    string(REGEX REPLACE "^lib" "" name ${name})
    string(JOIN " " dz_pc_libs ${dz_pc_libs} -L${dir} -l${name})
  endforeach()
endif()
# libdistzo.a's link line with the system's shared libraries: pkg-config --static would
# also want the static archives of libcurl's own dependencies, which distributions often
# lack. `pkg-config --variable=static_libs distzo` after the archive's path.
get_filename_component(dz_cjson_dir ${CJSON_LIBRARY} DIRECTORY)
string(JOIN " " dz_pc_static_libs ${MHD_LDFLAGS} ${CURL_LDFLAGS} -L${dz_cjson_dir} -lcjson ${dz_pc_libs})
if(IS_ABSOLUTE ${CMAKE_INSTALL_LIBDIR})
  set(dz_pc_prefix ${CMAKE_INSTALL_PREFIX})
  set(dz_pc_libdir ${CMAKE_INSTALL_LIBDIR})
else()
  file(RELATIVE_PATH dz_pc_up /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" dz_pc_up ${dz_pc_up})
  set(dz_pc_prefix "\${pcfiledir}/${dz_pc_up}")
  set(dz_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/distzo.pc.in ${CMAKE_BINARY_DIR}/distzo.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/distzo.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
