#!/usr/bin/env python3
"""Job-side shapes of the reliability campaign's row 8 (docs/reliability-rerun.md): a Python
process that records NVTX ranges through libflopscope_torch_nvtx.so and then leaves in an unusual
way. Run it under `flopscope run`; the ranges it made are printed, to compare with the store.

Usage: jobside.py SHIM MODE N
  exec N      push/pop N ranges, then execv nvtx_minimal --repeat 10 (NVTX_MINIMAL: its path)
  exit N      push/pop N ranges, then os._exit(3)
  spawn N     parent pushes N, then `with Pool(4)` (spawn; the with-block terminates the
              workers by SIGTERM) where each worker pushes N
  forkserver N  the same with the forkserver start method
  spawn-join N  the same as spawn but close() + join() (a clean end)"""

import ctypes
import multiprocessing
import os
import sys
import time

SHIM = sys.argv[1]


def push_pop(count, name=b"work"):
    lib = ctypes.CDLL(SHIM)
    for _ in range(count):
        lib.flopscope_torch_push(name)
        lib.flopscope_torch_pop()


def worker(count):
    push_pop(count, b"worker")
    return os.getpid()


def pool(method, count, join):
    context = multiprocessing.get_context(method)
    push_pop(count, b"parent")
    if join:
        p = context.Pool(4)
        p.map(worker, [count] * 4)
        p.close()
        p.join()
    else:
        with context.Pool(4) as p:
            p.map(worker, [count] * 4)
    print(f"{method} pool: {5 * count} ranges", flush=True)


def main():
    mode, count = sys.argv[2], int(sys.argv[3])
    if mode == "exec":
        push_pop(count)
        print(f"{count} ranges, then exec", flush=True)
        os.execv(os.environ["NVTX_MINIMAL"], ["nvtx_minimal", "--repeat", "10"])
    elif mode == "exit":
        push_pop(count)
        print(f"{count} ranges, then _exit(3)", flush=True)
        os._exit(3)
    elif mode in ("spawn", "forkserver"):
        pool(mode, count, join=False)
    elif mode == "spawn-join":
        pool("spawn", count, join=True)
    time.sleep(0)


if __name__ == "__main__":
    main()
