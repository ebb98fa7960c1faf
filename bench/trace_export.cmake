# bench/trace_export: `flopscope export` of a 1M-kernel job in both formats, against an
# in-process daemon (see trace_export.cc): seconds and peak RSS. Not registered in ctest.
add_executable(trace_export_benchmark ${CMAKE_CURRENT_LIST_DIR}/trace_export.cc)
flopscope_defaults(trace_export_benchmark)
target_link_libraries(trace_export_benchmark PRIVATE
  flopscope_bench_jobs flopscope_daemon_lib flopscope_trace_export CLI11::CLI11)
set_target_properties(trace_export_benchmark PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
