"""Helpers for the PyTorch integration tests (no tests here): launching ranks under
`flopscope run --torch`, the module paths a model must produce, the daemon's Report over gRPC
(it carries each rank's layout and the announced metadata, which the JSON output leaves out),
and range events read back from a rank's store."""

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from harness import tool

HERE = Path(__file__).resolve().parent
JOB_SCRIPT = HERE / "test_torch_job.py"
# The ranks run on the Python that runs the test, so the torch that builds the expected model
# here is theirs: Debian's /usr/bin/python3 (torch 1.13), or the torch 2 environment's for the
# *_torch2 tests (FLOPSCOPE_TEST_INTERPRETER, tests/unittest_runner.py).
PYTHON = sys.executable

try:
    import torch  # noqa: F401  pylint: disable=unused-import
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch_ranks(daemon_socket, job, world_size, script_args=(), extra_env=None,
                 script=JOB_SCRIPT):
    """Starts `world_size` ranks of the job script (`script`, test_torch_job.py unless told),
    each under `flopscope run --torch`, wired
    together through the environment (torchrun's own launcher is broken in Debian's torch 1.13
    on Python 3.11); returns the Popen objects."""
    port = free_port()
    processes = []
    for rank in range(world_size):
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1", **(extra_env or {})}
        processes.append(subprocess.Popen(
            [tool("flopscope"), "run", "--torch", "--job", job, "--socket", str(daemon_socket),
             "--", PYTHON, str(script), *script_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **env}))
    return processes


def wait_ranks(test, processes, timeout=150):
    outputs = []
    for rank, process in enumerate(processes):
        out, err = process.communicate(timeout=timeout)
        test.assertEqual(process.returncode, 0, f"rank {rank} failed:\n{err}")
        outputs.append((out, err))
    return outputs


def expected_module_paths(model, root_label):
    """qualified name -> range path for every module whose forward runs in training: the path
    is the root label, then the qualified name cut at each ancestor that runs (containers that
    never run, such as ModuleList, add no component). Found with plain forward hooks."""
    import torch as torch_module  # pylint: disable=import-outside-toplevel
    from test_torch_job import BATCH, SEQ, VOCAB  # pylint: disable=import-outside-toplevel

    called = []
    handles = [module.register_forward_pre_hook(lambda m, a, name=name: called.append(name))
               for name, module in model.named_modules()]
    try:
        model(torch_module.randint(0, VOCAB, (BATCH, SEQ)))
    finally:
        for handle in handles:
            handle.remove()
    paths = {}
    for name in called:
        if name == "":
            paths[name] = root_label
            continue
        parts = name.split(".")
        parent = next((".".join(parts[:cut]) for cut in range(len(parts) - 1, 0, -1)
                       if ".".join(parts[:cut]) in called), "")
        paths[name] = f"{paths[parent]}/{name[len(parent) + 1:] if parent else name}"
    return paths


def grpc_report(daemon_socket, job, ranks=()):
    """The daemon's Report message for `job` (Query.GetReport)."""
    import grpc  # pylint: disable=import-outside-toplevel
    from flopscope.v1 import query_pb2  # pylint: disable=import-outside-toplevel

    with grpc.insecure_channel(f"unix:{daemon_socket}") as channel:
        get_report = channel.unary_unary(
            "/flopscope.v1.Query/GetReport",
            request_serializer=query_pb2.ReportRequest.SerializeToString,
            response_deserializer=query_pb2.Report.FromString)
        return get_report(query_pb2.ReportRequest(job_id=job, ranks=list(ranks)), timeout=30)


def range_events(store_path):
    """[(domain, full path, thread, start_ns, end_ns)] of every range in one rank's store."""
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as db:
        paths = {(sid, pid): (parent, domain, name) for sid, pid, parent, domain, name in
                 db.execute("SELECT sid, id, parent_id, domain, name FROM range_paths")}

        def full(sid, pid):
            names = []
            while pid:
                parent, _, name = paths[(sid, pid)]
                names.append(name)
                pid = parent
            return "/".join(reversed(names))

        return [(paths[(sid, pid)][1], full(sid, pid), thread, start, end)
                for sid, pid, thread, start, end in
                db.execute("SELECT sid, path_id, thread_id, start_ns, end_ns FROM range_events")]


NO_TORCH = (f"torch is not installed for {PYTHON} (Debian's /usr/bin/python3: apt-get install "
            "python3-torch; the torch 2 environment: scripts/setup_torch2.sh)")
