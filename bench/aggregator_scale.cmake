# bench/aggregator_scale: one real flopscoped aggregator against many simulated node daemons
# (their Outbox and Forwarder in-process): forwarding throughput, the aggregator's CPU per rank
# and step, whole-job `flopscope report`/`ranks` time and disk per rank and step (see
# aggregator_scale.cc, docs/scaling.md). `--smoke` runs in ctest (label bench-smoke) so the bench
# keeps building and working.
add_executable(aggregator_scale ${CMAKE_CURRENT_LIST_DIR}/aggregator_scale.cc)
flopscope_defaults(aggregator_scale)
target_link_libraries(aggregator_scale PRIVATE
  flopscope_bench_jobs flopscope_daemon_lib flopscope_client_lib CLI11::CLI11)
target_compile_definitions(aggregator_scale PRIVATE
  FLOPSCOPE_BENCH_DAEMON="$<TARGET_FILE:flopscoped>"
  FLOPSCOPE_BENCH_CLIENT="$<TARGET_FILE:flopscope>")
add_dependencies(aggregator_scale flopscoped flopscope)
set_target_properties(aggregator_scale PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
add_test(NAME bench_aggregator_scale_smoke COMMAND aggregator_scale --smoke)
set_tests_properties(bench_aggregator_scale_smoke PROPERTIES LABELS bench-smoke TIMEOUT 60)
