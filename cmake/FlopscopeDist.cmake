# `cmake --build <dir> --target dist` (and `make dist`): the relocatable bundle
# <dir>/dist/flopscope-<version>-linux-x86_64.tar.gz, packed by scripts/make_dist.sh from the
# binaries, libraries and Python hooks of this build (README: "GPU nodes: install the bundle").
add_custom_target(dist
  COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/make_dist.sh ${CMAKE_BINARY_DIR}
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMENT "flopscope: packing the bundle into ${CMAKE_BINARY_DIR}/dist"
  VERBATIM)
# Resolved when the build is generated: the targets are defined later, in their folders.
add_dependencies(dist flopscoped flopscope flopscope_inject flopscope_transport flopscope_torch)
