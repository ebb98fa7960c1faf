# bench/import_throughput (owned by the import work; include()d by bench/CMakeLists.txt).
# Import throughput in MB/s and events/s on the largest shared fixture (or a file given on the
# command line), stage by stage and end to end into an in-process daemon.
find_package(simdjson CONFIG REQUIRED)  # its imported target is scoped to the directory
add_executable(import_throughput ${CMAKE_CURRENT_LIST_DIR}/import_throughput.cc)
flopscope_defaults(import_throughput)
target_link_libraries(import_throughput PRIVATE
  flopscope_importer_lib flopscope_bench_jobs flopscope_daemon_lib simdjson::simdjson CLI11::CLI11)
target_compile_definitions(import_throughput PRIVATE
  FLOPSCOPE_SHARED_DATA_DIR="${FLOPSCOPE_SHARED_DATA_DIR}")
set_target_properties(import_throughput PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
