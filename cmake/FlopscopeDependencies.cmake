# Every dependency comes from a Debian 12 package (scripts/setup_deps.sh) or /usr/local/cuda.
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED)  # daemon: SHA-256 of session resume tokens (libssl-dev)
find_package(GTest CONFIG REQUIRED)
find_package(benchmark CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
# flopscoped --metrics serves HTTP with civetweb (libcivetweb-dev). Debian's CMake config for it
# also requires /usr/bin/civetweb (package civetweb), so the library is found directly.
find_path(FLOPSCOPE_CIVETWEB_INCLUDE civetweb.h)
find_library(FLOPSCOPE_CIVETWEB_LIBRARY civetweb)
if(NOT FLOPSCOPE_CIVETWEB_INCLUDE OR NOT FLOPSCOPE_CIVETWEB_LIBRARY)
  message(FATAL_ERROR "civetweb not found: run scripts/setup_deps.sh build (libcivetweb-dev)")
endif()
add_library(civetweb::civetweb UNKNOWN IMPORTED)
set_target_properties(civetweb::civetweb PROPERTIES
  IMPORTED_LOCATION ${FLOPSCOPE_CIVETWEB_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${FLOPSCOPE_CIVETWEB_INCLUDE})

find_program(FLOPSCOPE_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# CUDA is optional for building: without it the injector runs NVTX-only. NVTX v3 is header-only;
# CUPTI's headers and libcupti come from the toolkit.
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
find_path(FLOPSCOPE_NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
if(NOT FLOPSCOPE_NVTX_INCLUDE_DIR)
  message(FATAL_ERROR "NVTX v3 headers (nvtx3/nvToolsExt.h) not found: install the CUDA toolkit "
                      "at /usr/local/cuda or pass -DFLOPSCOPE_NVTX_INCLUDE_DIR=...")
endif()
add_library(flopscope_nvtx_headers INTERFACE)
target_include_directories(flopscope_nvtx_headers SYSTEM INTERFACE ${FLOPSCOPE_NVTX_INCLUDE_DIR})

set(FLOPSCOPE_HAVE_CUDA OFF)
if(CUDAToolkit_FOUND AND TARGET CUDA::cudart AND TARGET CUDA::cublas)
  set(FLOPSCOPE_HAVE_CUDA ON)
endif()
set(FLOPSCOPE_HAVE_CUPTI OFF)
if(CUDAToolkit_FOUND AND TARGET CUDA::cupti)
  set(FLOPSCOPE_HAVE_CUPTI ON)
endif()
message(STATUS "flopscope: CUDA runtime ${FLOPSCOPE_HAVE_CUDA}, CUPTI ${FLOPSCOPE_HAVE_CUPTI}")

find_package(Python3 COMPONENTS Interpreter)
