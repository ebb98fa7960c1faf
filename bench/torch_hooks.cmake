# bench/torch_hooks (owned by the PyTorch work; include()d by bench/CMakeLists.txt).
# <build>/bench/torch_hooks runs bench/torch_hooks.py with Debian's python3 (python3-torch)
# against this build tree's flopscope_torch, injector and daemon.
set(TORCH_HOOKS_COMMAND
    "exec /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/torch_hooks.py --build-dir ${CMAKE_BINARY_DIR}")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/bench/torch_hooks
     CONTENT "#!/bin/sh\n${TORCH_HOOKS_COMMAND} \"$@\"\n"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                      WORLD_READ WORLD_EXECUTE)
