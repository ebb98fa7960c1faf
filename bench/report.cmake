# bench/report_benchmark: GetReport over 8 ranks x 1M kernels (with and without a step window) and
# `flopscope ranks` over 1024 ranks, against an in-process daemon (see report_benchmark.cc). Not
# registered in ctest.
add_executable(report_benchmark ${CMAKE_CURRENT_LIST_DIR}/report_benchmark.cc)
flopscope_defaults(report_benchmark)
target_link_libraries(report_benchmark PRIVATE
  flopscope_bench_jobs flopscope_daemon_lib flopscope_client_lib CLI11::CLI11)
set_target_properties(report_benchmark PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
