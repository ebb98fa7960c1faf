"""Nothing lost silently at SIGTERM (issue 15; docs/reliability-rerun.md, row 8): Python's
`with Pool()` under spawn and forkserver ends its workers with SIGTERM right after `map`
returns. The injector's SIGTERM path (injector/sigterm_drain.h) drains a worker's records
before the process dies of SIGTERM, and whatever it could not deliver in its bound is counted as
`killed`, from the made-counts file that names its session (common/made_counts_page.h), even
when the worker died before its transport started. Before, the workers' records were lost and
counted nowhere: 2 000 of 10 000 stored (spawn), 4 000 of 10 000 (forkserver).

Also: a single process ended by `kill -TERM` still dies of SIGTERM, with its records stored and
its session final; an application's own SIGTERM handler (installed before or after the
injector's session started) is the one that runs."""

import os
import select
import signal
import subprocess
import sys
import time

from harness import TEST_BIN_DIR, DaemonTestCase, report, start_job

# Pushes COUNT ranges in the parent ("parent"), then `with Pool(4)` maps 4 tasks that push COUNT
# ranges each ("worker"); the with-block terminates the workers (SIGTERM).
POOL_PROGRAM = r"""
import ctypes, multiprocessing, os, sys

def push_pop(count, name):
    lib = ctypes.CDLL(os.environ["NVTX_HELPER"])
    for _ in range(count):
        lib.flopscope_test_push(name)
        lib.flopscope_test_pop()

def worker(count):
    push_pop(count, b"worker")
    return count

if __name__ == "__main__":
    method, count = sys.argv[1], int(sys.argv[2])
    context = multiprocessing.get_context(method)
    push_pop(count, b"parent")
    with context.Pool(4) as pool:
        done = pool.map(worker, [count] * 4)
    print(f"{method} pool: {count + sum(done)} ranges", flush=True)
"""

# Pushes COUNT ranges, says so, then waits to be ended. HANDLER: "none", "before" (a Python
# SIGTERM handler installed before the first NVTX call, so before the injector's session) or
# "after" (installed after it); the handler prints and exits 7.
WAITING_PROGRAM = r"""
import ctypes, os, signal, sys, time

def handler(signum, frame):
    print("handled", signum, flush=True)
    sys.exit(7)

count, when = int(sys.argv[1]), sys.argv[2]
lib = ctypes.CDLL(os.environ["NVTX_HELPER"])
if when == "before":
    signal.signal(signal.SIGTERM, handler)
for _ in range(count):
    lib.flopscope_test_push(b"work")
    lib.flopscope_test_pop()
if when == "after":
    signal.signal(signal.SIGTERM, handler)
print("recorded", count, flush=True)
for _ in range(2400):  # short sleeps: a Python handler tripped just before one runs after it
    time.sleep(0.05)
"""

COUNT = 2000
WORKERS = 4  # Pool(4) maps 4 tasks


class PoolSigtermTest(DaemonTestCase):

    def setUp(self):
        super().setUp()
        self.daemon.args += ["--keep-raw-steps", "0"]
        self.spool = self.root / "spool"
        self.env = {"NVTX_HELPER": str(TEST_BIN_DIR / "libnvtx_pyhelper.so")}
        self.job = None

    def tearDown(self):
        if self.job is not None and self.job.poll() is None:
            self.job.kill()
            self.job.communicate()
        super().tearDown()

    def leftovers(self):
        if not self.spool.exists():
            return []
        # One folder per daemon the sessions were aimed at (common/spool_dir.h).
        return sorted(p.name for p in self.spool.glob("*/*") if p.suffix in (".spool", ".made"))

    def wait_until_collected(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.leftovers(), [], self.daemon.log())

    def run_pool(self, method):
        program = self.root / "pool_job.py"  # a file: spawn's children import their __main__
        program.write_text(POOL_PROGRAM)
        command = [sys.executable, str(program), method, str(COUNT)]
        env = dict(os.environ, **self.env)
        plain = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        self.daemon.start(extra_args=["--collect-spools", str(self.spool),
                                      "--collect-spools-period-s", "0.2"])
        job = f"pool-{method}"
        started = time.monotonic()
        self.job = start_job(self.daemon.socket, job, command, env=self.env)
        out, err = self.job.communicate(timeout=120)
        elapsed = time.monotonic() - started
        # The pool's exit behaviour is unchanged: its output and exit code.
        self.assertEqual((self.job.returncode, out), (plain.returncode, plain.stdout), err)
        self.assertEqual(out, f"{method} pool: {5 * COUNT} ranges\n")
        self.wait_until_collected()
        rep = report(self.daemon.socket, job)
        calls = {m["path"]: m["calls"] for m in rep["modules"]}
        stored = calls.get("parent", 0) + calls.get("worker", 0)
        lost = sum(rep["losses"].values())
        print(f"\n{method}: {stored} stored + {lost} counted {rep['losses']} of {5 * COUNT}; "
              f"{rep['sessions_without_final']} sessions without a final batch; "
              f"{elapsed:.2f} s with the injector (load {os.getloadavg()[0]:.1f})")
        self.assertEqual(calls.get("parent"), COUNT, rep["losses"])
        # Stored + counted lost == produced: nothing lost silently. A worker whose records were
        # counted as killed (from its made-counts file, with or without a spool) is charged what
        # it made, its drain's `process.end_signal` record included (a record it made, not a
        # range): at most one more per worker, and only when something was counted as killed.
        # (The workers' sessions share rank 0, so the report cannot say how many were charged.)
        charged = WORKERS if rep["losses"].get("killed", 0) else 0
        extra = stored + lost - 5 * COUNT
        self.assertTrue(0 <= extra <= charged, (extra, charged, rep["losses"], self.daemon.log()))

    def test_a_spawn_pool_terminated_by_its_with_block_loses_nothing_silently(self):
        self.run_pool("spawn")

    def test_a_forkserver_pool_terminated_by_its_with_block_loses_nothing_silently(self):
        self.run_pool("forkserver")

    def start_waiting(self, job, when):
        command = [sys.executable, "-c", WAITING_PROGRAM, str(COUNT), when]
        self.job = start_job(self.daemon.socket, job, command, env=self.env)
        ready, _, _ = select.select([self.job.stdout], [], [], 60)
        self.assertTrue(ready, "the job never said it had recorded")
        self.assertEqual(self.job.stdout.readline(), f"recorded {COUNT}\n")

    def test_kill_term_of_a_single_process_stores_its_records_and_it_still_dies_of_sigterm(self):
        self.daemon.start()  # no collector: the drain itself must deliver
        self.start_waiting("term-single", "none")
        sent = time.monotonic()
        self.job.send_signal(signal.SIGTERM)
        _, err = self.job.communicate(timeout=30)
        took = time.monotonic() - sent
        self.assertEqual(self.job.returncode, -signal.SIGTERM, err)
        print(f"\nSIGTERM to death: {took:.2f} s (load {os.getloadavg()[0]:.1f})")
        rep = report(self.daemon.socket, "term-single")
        calls = {m["path"]: m["calls"] for m in rep["modules"]}
        self.assertEqual(calls.get("work"), COUNT, (rep["losses"], self.daemon.log()))
        self.assertEqual(sum(rep["losses"].values()), 0, rep["losses"])
        self.assertEqual(rep["sessions_without_final"], 0)  # the drain sent the final batch
        self.assertEqual(self.leftovers(), [])

    def test_a_process_killed_before_its_transport_started_is_counted_in_its_session(self):
        # No transport (its library is missing), so no spool and no hello: only the made-counts
        # file, which names the session. Before, the collector could only log its count.
        self.daemon.start(extra_args=["--collect-spools", str(self.spool),
                                      "--collect-spools-period-s", "0.2"])
        self.env["FLOPSCOPE_TRANSPORT_PATH"] = str(self.root / "missing-transport.so")
        self.start_waiting("killed-untransported", "none")
        self.assertEqual([p.suffix for p in self.spool.glob("*/*")], [".made"])
        self.job.send_signal(signal.SIGKILL)
        self.job.communicate(timeout=30)
        self.assertEqual(self.job.returncode, -signal.SIGKILL)
        self.wait_until_collected()
        rep = report(self.daemon.socket, "killed-untransported")
        self.assertEqual(rep["losses"], {"killed": COUNT}, self.daemon.log())
        self.assertEqual(rep["sessions_without_final"], 1)

    def test_the_applications_own_sigterm_handler_runs_whether_set_before_or_after(self):
        self.daemon.start()
        for when in ("before", "after"):
            with self.subTest(when=when):
                self.start_waiting(f"own-handler-{when}", when)
                self.job.send_signal(signal.SIGTERM)
                out, err = self.job.communicate(timeout=30)
                self.assertEqual((self.job.returncode, out),
                                 (7, f"handled {int(signal.SIGTERM)}\n"), err)
                # sys.exit runs the normal exit path: everything delivered.
                rep = report(self.daemon.socket, f"own-handler-{when}")
                calls = {m["path"]: m["calls"] for m in rep["modules"]}
                self.assertEqual(calls.get("work"), COUNT, rep["losses"])
