# bench/nvtx_overhead (owned by the injector work; include()d by bench/CMakeLists.txt).
# Two identical loop modules (each its own NVTX instance: one left a no-op, one injected) and
# the driver, all in <build>/bench.
foreach(copy plain injected)
  add_library(nvtx_overhead_loop_${copy} MODULE ${CMAKE_CURRENT_LIST_DIR}/nvtx_overhead_loop.cc)
  flopscope_defaults(nvtx_overhead_loop_${copy})
  target_link_libraries(nvtx_overhead_loop_${copy} PRIVATE flopscope_nvtx_headers ${CMAKE_DL_LIBS})
  set_target_properties(nvtx_overhead_loop_${copy} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endforeach()

add_executable(nvtx_overhead ${CMAKE_CURRENT_LIST_DIR}/nvtx_overhead.cc)
flopscope_defaults(nvtx_overhead)
target_link_libraries(nvtx_overhead PRIVATE flopscope_fake_collector CLI11::CLI11 ${CMAKE_DL_LIBS})
target_compile_definitions(nvtx_overhead PRIVATE
  NVTX_OVERHEAD_INJECTOR="$<TARGET_FILE:flopscope_inject>"
  NVTX_OVERHEAD_LOOP_PLAIN="$<TARGET_FILE:nvtx_overhead_loop_plain>"
  NVTX_OVERHEAD_LOOP_INJECTED="$<TARGET_FILE:nvtx_overhead_loop_injected>")
add_dependencies(nvtx_overhead flopscope_inject nvtx_overhead_loop_plain nvtx_overhead_loop_injected)
set_target_properties(nvtx_overhead PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
