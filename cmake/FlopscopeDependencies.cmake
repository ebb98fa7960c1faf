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
# flopscoped --metrics: its families written by prometheus-cpp (prometheus-cpp-dev, core library)
# and served over HTTP by civetweb (libcivetweb-dev). prometheus-cpp's config finds civetweb's,
# whose /usr/bin/civetweb check the package civetweb (a dependency of prometheus-cpp-dev) meets.
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(civetweb CONFIG REQUIRED)

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
