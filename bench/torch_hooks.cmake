# bench/torch_hooks (owned by the PyTorch work; include()d by bench/CMakeLists.txt).
# <build>/bench/torch_hooks runs bench/torch_hooks.py against this build tree's flopscope_torch,
# injector and daemon on both torches the tests use, one after the other: Debian's python3
# (python3-torch) and the torch 2 environment's (scripts/setup_torch2.sh; said and left out where
# it is not there). Arguments go to both runs.
set(TORCH_HOOKS_SCRIPT [=[#!/bin/sh
set -e
for python in /usr/bin/python3 @FLOPSCOPE_TORCH2_PYTHON@; do
  if [ ! -x "$python" ]; then
    echo "== torch_hooks: no $python (the torch 2 environment: scripts/setup_torch2.sh)"
    continue
  fi
  echo "== torch_hooks on torch $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null) ($python)"
  "$python" @CMAKE_CURRENT_LIST_DIR@/torch_hooks.py --build-dir @CMAKE_BINARY_DIR@ "$@"
done
]=])
string(CONFIGURE "${TORCH_HOOKS_SCRIPT}" TORCH_HOOKS_SCRIPT @ONLY)
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/bench/torch_hooks
     CONTENT "${TORCH_HOOKS_SCRIPT}"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                      WORLD_READ WORLD_EXECUTE)
