# bench/query_latency: `report` and `ranks` timed against a running daemon from one client
# process (tests/reliability/load.sh runs it with PROBE=1).
add_executable(query_latency ${CMAKE_CURRENT_LIST_DIR}/query_latency.cc)
flopscope_defaults(query_latency)
target_link_libraries(query_latency PRIVATE flopscope_client_lib CLI11::CLI11)
set_target_properties(query_latency PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
