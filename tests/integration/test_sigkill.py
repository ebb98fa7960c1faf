"""SIGKILL loses nothing already assembled into a batch (issue 15 item 2): the injector writes every
batch into its session's spool file before sending it (a write-ahead log in the page cache, which
outlives the process), so a job killed with SIGKILL leaves the batches the daemon had not
acknowledged in an orphaned spool file; flopscoped's collector delivers them once, deduplicated by
(session, seq), and the session stays flagged as ended without a final batch. Before the log, the
same kills lost those batches silently: only what had reached the daemon's socket was stored, and
nothing of the rest was counted. What was still in the thread buffers at the kill is counted
(`killed`) from the session's made-counts file (common/made_counts_page.h)."""

import os
import select
import signal
import sqlite3
import struct
import time

from flopscope.v1 import collector_pb2
from harness import TEST_BIN_DIR, DaemonTestCase, report, start_job
from test_spool import NO_FOLDING, StoredJob, produced, transformer

# Records ranges in parts: before part i it waits for the file <control dir>/go-<i>, which holds
# the count of push/pop pairs to record; after recording them it prints "recorded <count>" (the
# records it made, read by the test). After the last part it waits: the test kills it.
PROGRAM = r"""
import ctypes, pathlib, sys, time
helper = ctypes.CDLL(sys.argv[1])
control = pathlib.Path(sys.argv[2])
part = 0
while True:
    go = control / f"go-{part}"
    if not go.exists():
        time.sleep(0.01)
        continue
    count = int(go.read_text())
    for _ in range(count):
        helper.flopscope_test_push(b"work")
        helper.flopscope_test_pop()
    print("recorded", count, flush=True)
    part += 1
"""

MAGIC = b"FSSPOOL1"
FRAME = struct.Struct("<IQQ")  # payload length, seq, records (common/spool/spool_file.h)


def spooled_frames(path):
    """{seq: (records, payload)} of the batches a spool file holds (the later frame of a seq
    wins; the first frame is the session's hello)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    if data[:len(MAGIC)] != MAGIC:
        return {}
    offset, by_seq, first = len(MAGIC), {}, True
    while offset + FRAME.size <= len(data):
        length, seq, records = FRAME.unpack_from(data, offset)
        start = offset + FRAME.size
        if start + length > len(data):
            break  # cut short (still being written)
        if not first:
            by_seq[seq] = (records, data[start:start + length])
        first = False
        offset = start + length
    return by_seq


def spooled_records(path):
    return sum(records for records, _ in spooled_frames(path).values())


def holds_final_batch(path):
    return any(collector_pb2.UpMessage.FromString(payload).batch.final
               for _, payload in spooled_frames(path).values())


class SigkillTest(DaemonTestCase):

    def setUp(self):
        super().setUp()
        self.daemon.args += NO_FOLDING  # raw rows are counted below
        self.job = None

    def tearDown(self):
        if self.job is not None and self.job.poll() is None:
            self.job.kill()
            self.job.communicate()
        if self.daemon.process is not None and self.daemon.process.poll() is None:
            self.daemon.process.send_signal(signal.SIGCONT)
        super().tearDown()

    def spool_dir(self):
        return self.root / "spool"

    def spool_files(self):
        spool = self.spool_dir()
        return sorted(spool.glob("*/*.spool")) if spool.exists() else []

    def start(self, socket, job, flush_ms=20):
        """`flopscope run` execs the program: the process is the injected job itself."""
        self.control = self.root / "control"
        self.control.mkdir()
        self.parts = 0
        command = ["/usr/bin/python3", "-c", PROGRAM, str(TEST_BIN_DIR / "libnvtx_pyhelper.so"),
                   str(self.control)]
        self.job = start_job(socket, job, command, env={"FLOPSCOPE_FLUSH_MS": str(flush_ms)})

    def record(self, count, timeout=60.0):
        """Asks the job for `count` ranges; returns what it says it recorded."""
        go = self.control / f"go-{self.parts}"
        go.with_suffix(".tmp").write_text(str(count))
        go.with_suffix(".tmp").rename(go)  # whole, never half-written
        self.parts += 1
        line = b""
        deadline = time.monotonic() + timeout
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([self.job.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(self.job.stdout.fileno(), 1)
                if not chunk:
                    break  # the job ended
                line += chunk
        text = line.decode()
        self.assertTrue(text.startswith("recorded "), f"{text!r}, job {self.job.poll()}")
        return int(text.split()[1])

    def wait_for_spooled(self, records, timeout=20.0):
        """Waits until the job's spool file holds `records` records; returns the file."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            files = self.spool_files()
            if len(files) == 1 and spooled_records(files[0]) >= records:
                return files[0]
            time.sleep(0.02)
        files = self.spool_files()
        self.fail(f"the spool never held the {records} records the job made: "
                  f"{[(f.name, spooled_records(f)) for f in files]}")

    def kill_job(self):
        self.job.send_signal(signal.SIGKILL)
        _, err = self.job.communicate(timeout=30)
        self.assertEqual(self.job.returncode, -signal.SIGKILL, err)
        return err

    def wait_until_collected(self, timeout=30.0):
        # The collector removes a spool, then the made-counts file beside it: wait for both.
        def left():
            return self.spool_files() + list(self.spool_dir().glob("*/*.made"))
        deadline = time.monotonic() + timeout
        while left() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.spool_files(), [], self.daemon.log())

    def stored(self, job):
        """(range events, distinct (session, instance) pairs) in the job's rank file."""
        db = sqlite3.connect(f"file:{self.daemon.rank_file(job, 0)}?mode=ro", uri=True)
        try:
            total = db.execute("SELECT COUNT(*) FROM range_events").fetchone()[0]
            distinct = db.execute(
                "SELECT COUNT(*) FROM (SELECT DISTINCT sid, instance_id FROM range_events)"
            ).fetchone()[0]
            return total, distinct
        finally:
            db.close()

    def check_whole(self, job, made):
        """stored + counted lost == made, nothing twice, and the kill is not silent."""
        rep = report(self.daemon.socket, job)
        calls = {m["path"]: m["calls"] for m in rep["modules"]}
        lost = sum(rep["losses"].values())
        self.assertEqual(calls.get("work", 0) + lost, made, (rep["losses"], self.daemon.log()))
        self.assertEqual(calls.get("work", 0), made, rep["losses"])  # nothing lost at all
        total, distinct = self.stored(job)
        self.assertEqual(total, distinct)  # no (session, instance) stored twice
        self.assertEqual(total, made)
        self.assertEqual(rep["sessions_without_final"], 1)  # killed: no final batch

    def test_a_job_killed_while_the_daemon_is_away_leaves_its_batches_to_the_collector(self):
        # No daemon: every batch waits unacknowledged, in memory (well within the budget) and,
        # written ahead, in the spool file.
        self.start(self.root / "nobody.sock", "killed-away")
        made = self.record(3000)
        made += self.record(2000)
        self.wait_for_spooled(made)
        self.kill_job()
        self.assertEqual(len(self.spool_files()), 1)  # the orphan
        # It was aimed at nobody.sock: this daemon delivers it when told to (issue 32).
        self.daemon.start(extra_args=["--collect-spools", str(self.spool_dir()),
                                      "--collect-spools-for", str(self.root / "nobody.sock")])
        self.wait_until_collected()
        self.check_whole("killed-away", made)

    def test_a_job_killed_while_its_daemon_stalls_is_completed_from_its_spool_once(self):
        # The daemon stores the first part, then stops answering (SIGSTOP): the second part is
        # written ahead and partly sent, never acknowledged. The job is killed; the daemon resumes,
        # stores what reached its socket, and its collector delivers the rest from the orphan,
        # each batch once.
        self.daemon.start(extra_args=["--collect-spools", str(self.spool_dir()),
                                      "--collect-spools-period-s", "0.2"])
        self.start(self.daemon.socket, "killed-stalled")
        made = self.record(2000)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            files = self.spool_files()
            if self.stored_calls("killed-stalled") == made and len(files) == 1 and \
                    spooled_records(files[0]) == 0:
                break  # stored, acknowledged, and cut from the spool file
            time.sleep(0.05)
        self.assertEqual(self.stored_calls("killed-stalled"), made)
        self.assertEqual([spooled_records(f) for f in self.spool_files()], [0])
        self.daemon.process.send_signal(signal.SIGSTOP)
        second = self.record(100000)
        made += second
        self.wait_for_spooled(second)
        self.kill_job()
        self.daemon.process.send_signal(signal.SIGCONT)
        self.wait_until_collected()
        self.check_whole("killed-stalled", made)

    def test_an_example_killed_while_it_waits_at_exit_for_acks_is_delivered_whole(self):
        # examples/transformer_nvtx; what it makes is measured from complete runs (test_spool).
        steps = 2000
        made = produced(steps)
        self.daemon.start(extra_args=["--collect-spools", str(self.spool_dir()),
                                      "--collect-spools-period-s", "0.2"])
        self.job = start_job(self.daemon.socket, "killed-example", transformer(steps),
                             env={"FLOPSCOPE_FLUSH_MS": "20",
                                  "FLOPSCOPE_EXIT_TIMEOUT_MS": "120000"})
        # Once the daemon has stored a batch (the stream is up and acknowledged), the daemon
        # stalls: the job runs on, ends its steps, writes its final batch ahead, and waits for
        # acks at exit.
        deadline = time.monotonic() + 30
        while self.stored_rows("killed-example") == 0 and time.monotonic() < deadline:
            self.assertIsNone(self.job.poll(), "the job ended before the daemon stalled")
            time.sleep(0.01)
        self.assertGreater(self.stored_rows("killed-example"), 0, self.daemon.log())
        self.daemon.process.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
                holds_final_batch(f) for f in self.spool_files()):
            self.assertIsNone(self.job.poll(), "the job ended before it was killed")
            time.sleep(0.05)
        self.assertTrue(any(holds_final_batch(f) for f in self.spool_files()))
        self.job.send_signal(signal.SIGKILL)
        self.job.communicate(timeout=30)
        self.assertEqual(self.job.returncode, -signal.SIGKILL)
        self.daemon.process.send_signal(signal.SIGCONT)
        self.wait_until_collected()
        stored = StoredJob(self.daemon, "killed-example")
        self.assertEqual(stored.records + sum(stored.losses.values()), made, stored.losses)
        self.assertEqual(stored.records, made)
        self.assertEqual(stored.ranges, stored.distinct)  # nothing twice
        self.assertEqual(stored.final, [1])  # its final batch came from the spool

    def test_records_left_in_thread_buffers_at_a_kill_are_counted_as_killed(self):
        # A flush interval longer than the test: the exporter takes records only when a buffer
        # crosses its wake threshold (8192 records), so the first part (over it) is exported, up
        # to where the woken exporter drained, and the rest, with the second part, stays in the
        # buffer until the kill. The made-counts file beside the spool says how many were made.
        self.daemon.start(extra_args=["--collect-spools", str(self.spool_dir()),
                                      "--collect-spools-period-s", "0.2"])
        self.start(self.daemon.socket, "killed-buffered", flush_ms=60000)
        made = self.record(9000)
        # Read from the rank file: `report` would ask the live session to flush. Settled when
        # three reads 0.3 s apart agree and the spool holds nothing unacknowledged: on a loaded
        # machine the woken exporter can pause longer than one interval between its batches.
        stored, same, deadline = -1, 0, time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.3)
            now = self.stored_rows("killed-buffered")
            settled = now == stored and now > 0 and \
                [spooled_records(f) for f in self.spool_files()] == [0]
            same = same + 1 if settled else 0
            stored = now
            if same >= 2:
                break  # stored, acknowledged, and nothing more coming
        self.assertGreater(stored, 0, self.daemon.log())
        made += self.record(1000)
        time.sleep(0.5)
        self.assertEqual(self.stored_rows("killed-buffered"), stored)  # the rest still buffered
        self.assertLess(stored, made)
        self.assertEqual(len(list(self.spool_dir().glob("*/*.made"))), 1)
        self.kill_job()
        self.wait_until_collected()
        self.assertEqual(list(self.spool_dir().glob("*/*.made")), [])  # removed with the spool
        rep = report(self.daemon.socket, "killed-buffered")
        calls = {m["path"]: m["calls"] for m in rep["modules"]}.get("work", 0)
        self.assertEqual(calls, stored)
        self.assertEqual(rep["losses"].get("killed"), made - stored, rep["losses"])
        self.assertEqual(calls + sum(rep["losses"].values()), made, rep["losses"])
        self.assertEqual(rep["sessions_without_final"], 1)

    def test_a_job_killed_before_its_first_batch_has_its_records_counted_as_killed(self):
        # Fewer records than a wake threshold and a long flush interval: no batch is ever sent.
        # The spool file still exists from the start with the session's hello, so the collector
        # charges the made-counts file beside it to that session.
        self.daemon.start(extra_args=["--collect-spools", str(self.spool_dir()),
                                      "--collect-spools-period-s", "0.2"])
        self.start(self.daemon.socket, "killed-early", flush_ms=60000)
        made = self.record(100)
        deadline = time.monotonic() + 20  # the transport loads on the exporter thread
        while not self.spool_files() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual([spooled_records(f) for f in self.spool_files()], [0])  # its hello only
        self.assertEqual(len(list(self.spool_dir().glob("*/*.made"))), 1)
        self.kill_job()
        self.wait_until_collected()
        self.assertEqual(list(self.spool_dir().glob("*/*.made")), [])
        rep = report(self.daemon.socket, "killed-early")
        calls = {m["path"]: m["calls"] for m in rep["modules"]}.get("work", 0)
        self.assertEqual(calls, 0)
        self.assertEqual(rep["losses"].get("killed"), made, (rep["losses"], self.daemon.log()))
        self.assertNotIn("counted nowhere", self.daemon.log())

    def stored_rows(self, job):
        """Range events in the job's rank file (0 before it exists); read-only, so it works
        whatever the daemon is doing."""
        path = self.daemon.rank_file(job, 0)
        if not path.exists():
            return 0
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM range_events").fetchone()[0]
        except sqlite3.OperationalError:
            return 0  # the schema is being made
        finally:
            db.close()

    def stored_calls(self, job):
        try:
            rep = report(self.daemon.socket, job)
        except AssertionError:
            return 0  # not known yet
        return {m["path"]: m["calls"] for m in rep["modules"]}.get("work", 0)


if __name__ == "__main__":
    import unittest
    unittest.main()
