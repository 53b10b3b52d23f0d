# FindJansson: the Jansson JSON library as the imported target Jansson::Jansson. Uses
# pkg-config when there is one, else looks for jansson.h and libjansson in the prefixes
# (CMAKE_PREFIX_PATH: e.g. Debian packages unpacked by benchmarks/gpu_deps.sh).
# Sets Jansson_FOUND, Jansson_VERSION, JANSSON_INCLUDE_DIR, JANSSON_LIBRARY.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_JANSSON QUIET jansson)
endif()
find_path(JANSSON_INCLUDE_DIR jansson.h HINTS ${PC_JANSSON_INCLUDE_DIRS})
find_library(JANSSON_LIBRARY NAMES jansson HINTS ${PC_JANSSON_LIBRARY_DIRS})
if(JANSSON_INCLUDE_DIR AND EXISTS "${JANSSON_INCLUDE_DIR}/jansson.h")
  file(STRINGS "${JANSSON_INCLUDE_DIR}/jansson.h" _jv REGEX "^#define JANSSON_VERSION +\"")
  string(REGEX REPLACE ".*\"([^\"]+)\".*" "\\1" Jansson_VERSION "${_jv}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Jansson REQUIRED_VARS JANSSON_LIBRARY JANSSON_INCLUDE_DIR
                                  VERSION_VAR Jansson_VERSION)
if(Jansson_FOUND AND NOT TARGET Jansson::Jansson)
  add_library(Jansson::Jansson UNKNOWN IMPORTED)
  set_target_properties(Jansson::Jansson PROPERTIES
    IMPORTED_LOCATION "${JANSSON_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${JANSSON_INCLUDE_DIR}")
endif()
mark_as_advanced(JANSSON_INCLUDE_DIR JANSSON_LIBRARY)
