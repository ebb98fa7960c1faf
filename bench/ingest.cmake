# bench/ingest: end-to-end kernel-record ingest vs raw SQLite inserts (see ingest.cc).
add_executable(ingest ${CMAKE_CURRENT_LIST_DIR}/ingest.cc)
flopscope_defaults(ingest)
target_link_libraries(ingest PRIVATE flopscope_inject_core flopscope_daemon_lib CLI11::CLI11)
target_compile_definitions(ingest PRIVATE
  FLOPSCOPE_BENCH_DAEMON="$<TARGET_FILE:flopscoped>"
  FLOPSCOPE_BENCH_TRANSPORT="$<TARGET_FILE:flopscope_transport>")
add_dependencies(ingest flopscoped flopscope_transport)
set_target_properties(ingest PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
