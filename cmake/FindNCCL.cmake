# FindNCCL: NCCL headers and library, as the imported target NCCL::NCCL.
# With NCCL_ROOT (-DNCCL_ROOT=..., or the environment variable), only there: e.g. the
# nvidia-nccl-cu13 wheel's folder site-packages/nvidia/nccl, with include/nccl.h and
# lib/libnccl.so.2 but no unversioned libnccl.so. Otherwise next to the CUDA toolkit
# (CUDAToolkit_ROOT, /usr/local/cuda) and in system paths.
# Sets NCCL_FOUND, NCCL_VERSION, NCCL_INCLUDE_DIR, NCCL_LIBRARY.
if(NOT NCCL_ROOT AND DEFINED ENV{NCCL_ROOT})
  set(NCCL_ROOT $ENV{NCCL_ROOT})
endif()
if(NCCL_ROOT)
  # only there: header and library must come from the same NCCL
  find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${NCCL_ROOT} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR PATHS ${NCCL_ROOT}
               PATH_SUFFIXES lib64 lib NO_DEFAULT_PATH)
else()
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_ROOT} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
    HINTS ${CUDAToolkit_ROOT} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda
    PATH_SUFFIXES lib64 lib)
endif()
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_v REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part} ([0-9]+).*" "\\1" NCCL_${_part} "${_nccl_v}")
  endforeach()
  set(NCCL_VERSION "${NCCL_MAJOR}.${NCCL_MINOR}.${NCCL_PATCH}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
                                  VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
