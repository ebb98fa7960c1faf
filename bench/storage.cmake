# bench/storage_benchmark: rank file bytes per kernel and per step, raw and with old steps folded,
# and the projected MB per rank and hour (see storage.cc). Not registered in ctest.
add_executable(storage_benchmark ${CMAKE_CURRENT_LIST_DIR}/storage.cc)
flopscope_defaults(storage_benchmark)
target_link_libraries(storage_benchmark PRIVATE flopscope_daemon_lib CLI11::CLI11)
set_target_properties(storage_benchmark PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
