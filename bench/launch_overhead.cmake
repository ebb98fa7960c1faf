# bench/launch_overhead (owned by the kernel tracing work; include()d by bench/CMakeLists.txt):
# what kernel tracing adds per kernel, measured without a GPU.
if(FLOPSCOPE_HAVE_CUPTI)
  add_executable(launch_overhead ${CMAKE_CURRENT_LIST_DIR}/launch_overhead.cc)
  flopscope_defaults(launch_overhead)
  target_link_libraries(launch_overhead PRIVATE flopscope_cupti_testing CLI11::CLI11)
  set_target_properties(launch_overhead PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
