"""The daemon's own faults (issue 15): one daemon per data dir, a restart right after kill -9
that serves at once with nothing lost or stored twice, a full disk refused by name with the
files consistent, a damaged rank file moved aside at start, a rank file left alone (a symlink, a
newer daemon's file) with its rank stored beside it, client text that cannot forge log lines,
and the daemon's CPU priority: above the jobs, with a stream's commits behind its queries."""

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
import unittest
from pathlib import Path

import grpc

from flopscope.v1 import collector_pb2, query_pb2, records_pb2
from harness import (DaemonTestCase, client, mount_tmpfs, rank_env, report, run_job, start_job,
                     test_program, tool)

STREAM = "/flopscope.v1.Collector/Stream"
GET_REPORT = "/flopscope.v1.Query/GetReport"


def private_spool(test, extra=None):
    """The job's environment with a spool of its own: what it spools never reaches another
    test's daemon."""
    env = {"FLOPSCOPE_SPOOL_DIR": str(test.root / "spool")}
    env.update(extra or {})
    return env


def stored(rank_file):
    """(range events, distinct (sid, instance_id), sessions not final) of a rank file."""
    db = sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT COUNT(*), COUNT(DISTINCT sid || ':' || instance_id) "
                          "FROM range_events").fetchone()
        unfinished = db.execute("SELECT COUNT(*) FROM sessions WHERE final = 0").fetchone()[0]
        return rows[0], rows[1], unfinished
    finally:
        db.close()


def pops_by_name(rank_file, parent, child):
    """(events of `parent`, events of `child` under `parent`) in a rank file."""
    db = sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True)
    try:
        counts = dict(db.execute(
            "SELECT CASE WHEN p.name = ? THEN 'parent' ELSE 'child' END, COUNT(*) "
            "FROM range_events e JOIN range_paths p ON p.sid = e.sid AND p.id = e.path_id "
            "LEFT JOIN range_paths up ON up.sid = p.sid AND up.id = p.parent_id "
            "WHERE p.name = ? OR (p.name = ? AND up.name = ?) GROUP BY 1",
            (parent, parent, child, parent)).fetchall())
        return counts.get("parent", 0), counts.get("child", 0)
    finally:
        db.close()


def grpc_report(socket, job):
    """The GetReport answer as a proto (the unreadable ranks included)."""
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        call = channel.unary_unary(GET_REPORT,
                                   request_serializer=query_pb2.ReportRequest.SerializeToString,
                                   response_deserializer=query_pb2.Report.FromString)
        return call(query_pb2.ReportRequest(job_id=job), timeout=30)


def hello_stream(socket, hello):
    """Sends one hello and ends the stream; returns (status code, details, trailers)."""
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        call = channel.stream_stream(STREAM,
                                     request_serializer=collector_pb2.UpMessage.SerializeToString,
                                     response_deserializer=collector_pb2.DownMessage.FromString)
        responses = call(iter([collector_pb2.UpMessage(hello=hello)]), timeout=20)
        try:
            for _ in responses:
                pass
        except grpc.RpcError:
            pass
        return responses.code(), responses.details(), dict(responses.trailing_metadata() or ())


def hello(job, rank, session, host="testhost"):
    return records_pb2.SessionHello(protocol_version=1, session_id=session, job_id=job, rank=rank,
                                    world_size=1, host=host, pid=4242,
                                    start_time_ns=time.time_ns())


class KillAndRestartTest(DaemonTestCase):

    def test_restart_right_after_kill9_serves_and_the_job_loses_nothing(self):
        self.daemon.start()
        go = self.root / "go"
        before, after = 60000, 60000
        command = [test_program("nvtx_phases"), "--before", str(before), "--wait-file", str(go),
                   "--after", str(after)]
        jobs = [start_job(self.daemon.socket, "k9", command,
                          env=private_spool(self, rank_env(rank, 2))) for rank in range(2)]
        time.sleep(0.3)  # mid-stream: the ranks are still pushing and sending "before" ranges
        killed = self.daemon.process
        killed.send_signal(signal.SIGKILL)  # and no wait for the old pid
        old_log = self.daemon.log()
        started = time.monotonic()
        self.daemon.start()  # start() fails the test when the new daemon exits or does not serve
        killed.wait()
        self.assertLess(time.monotonic() - started, 5.0, self.daemon.log())
        self.assertNotIn("already", self.daemon.log())
        go.touch()
        for job in jobs:
            out, err = job.communicate(timeout=120)
            self.assertEqual(job.returncode, 0, err)
            self.assertNotIn("not delivered", err)
        for rank in range(2):
            events, distinct, unfinished = stored(self.daemon.rank_file("k9", rank))
            self.assertEqual(events, 2 * (before + after), f"rank {rank}\n{old_log}")
            self.assertEqual(distinct, events, f"rank {rank}: stored twice")
            self.assertEqual(unfinished, 0, f"rank {rank}")

    def test_a_second_daemon_on_the_data_dir_is_refused_naming_the_first(self):
        self.daemon.start()
        rival = subprocess.run(
            [tool("flopscoped"),
             "--socket", str(self.root / "other.sock"), "--data-dir", str(self.daemon.data_dir)],
            capture_output=True, text=True, timeout=30)
        self.assertEqual(rival.returncode, 1, rival.stderr)
        self.assertIn(f"another flopscoped (pid {self.daemon.process.pid}) is using the data "
                      f"directory {self.daemon.data_dir}", rival.stderr)
        self.assertFalse((self.root / "other.sock").exists())
        self.assertEqual(client(["jobs", "--socket", str(self.daemon.socket)]).returncode, 0)


class DiskFullTest(DaemonTestCase):

    def setUp(self):
        super().setUp()
        self.mount = mount_tmpfs(self, self.root / "small", "2m")
        self.daemon.data_dir = self.mount / "data"

    def test_a_full_disk_is_refused_by_name_and_the_files_stay_consistent(self):
        self.daemon.start()
        result = run_job(self.daemon.socket, "full",
                         [test_program("nvtx_phases"), "--before", "400000"],
                         env=private_spool(self), timeout=180)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("daemon disk full", self.daemon.log())

        # Every committed batch is whole, and the catalog says what the rank file holds.
        events, distinct, _ = stored(self.daemon.rank_file("full", 0))
        self.assertGreater(events, 0)
        self.assertLess(events, 800000)
        self.assertEqual(distinct, events)
        # A committed prefix of the pops: each "work" pops before its "before", and a batch may
        # end between the two, so at most one "work" is ahead of its parent (an even count was
        # asserted here, which a batch ending between them broke under load).
        before, work = pops_by_name(self.daemon.rank_file("full", 0), "before", "work")
        self.assertEqual(before + work, events)
        self.assertIn(work - before, (0, 1))
        listing = client(["ranks", "full", "--socket", str(self.daemon.socket), "--format",
                          "json"])
        self.assertEqual(listing.returncode, 0, listing.stderr)
        (rank,) = json.loads(listing.stdout)["ranks"]
        self.assertEqual(rank["ranges"], events)
        self.assertFalse(rank["connected"])

        # With no room left at all, a new stream is refused up front, with the reason.
        filler = self.mount / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"], capture_output=True)
        code, details, trailers = hello_stream(self.daemon.socket, hello("full2", 0, "s-full2"))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, details)
        self.assertTrue(details.startswith("daemon disk full"), details)
        self.assertEqual(trailers.get("flopscope-refusal-reason"), "daemon disk full")
        # Room again: served again, no restart needed.
        filler.unlink()
        code, details, _ = hello_stream(self.daemon.socket, hello("full2", 0, "s-full2"))
        self.assertEqual(code, grpc.StatusCode.OK, details)


class DamagedFileTest(DaemonTestCase):

    def test_a_damaged_rank_file_is_moved_aside_and_the_job_report_names_it(self):
        self.daemon.start()
        for rank in range(2):
            result = run_job(self.daemon.socket, "dmg", [test_program("nvtx_phases"),
                                                         "--before", "50"],
                             env=private_spool(self, rank_env(rank, 2)))
            self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.daemon.stop(), 0)
        bad = self.daemon.rank_file("dmg", 1)
        with open(bad, "r+b") as f:
            f.write(b"\xa5" * 100)  # the header: no longer an SQLite file

        self.daemon.start()
        lines = [line for line in self.daemon.log().splitlines() if str(bad) in line]
        self.assertEqual(len(lines), 1, self.daemon.log())
        self.assertIn(f"damaged file {bad} moved aside to {bad}.damaged", lines[0])
        self.assertFalse(bad.exists())

        rep = grpc_report(self.daemon.socket, "dmg")
        self.assertEqual([r.rank for r in rep.ranks], [0])
        self.assertEqual([u.rank for u in rep.unreadable_ranks], [1])
        self.assertIn(f"{bad}.damaged", rep.unreadable_ranks[0].problem)
        self.assertEqual(report(self.daemon.socket, "dmg", rank=0)["modules"][0]["calls"], 50)

        # New data for that rank goes into a fresh file, never into the damaged one.
        damaged_size = (Path(f"{bad}.damaged")).stat().st_size
        # --append: the rank re-runs into the finished job itself (not a new run dmg.run2).
        result = run_job(self.daemon.socket, "dmg", [test_program("nvtx_phases"), "--before", "7"],
                         env=private_spool(self, rank_env(1, 2)), run_args=["--append"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(stored(bad)[0], 14)
        self.assertEqual(Path(f"{bad}.damaged").stat().st_size, damaged_size)


    def test_a_damaged_catalog_is_replaced_and_the_jobs_stay_listed(self):
        self.daemon.start()
        result = run_job(self.daemon.socket, "cat", [test_program("nvtx_phases"), "--before",
                                                     "20"], env=private_spool(self))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.daemon.stop(), 0)
        catalog = self.daemon.data_dir / "catalog.sqlite"
        with open(catalog, "r+b") as f:
            f.write(b"\xa5" * 100)

        self.daemon.start()  # no longer refused: the damaged catalog is moved aside
        self.assertIn(f"damaged file {catalog} moved aside to {catalog}.damaged", self.daemon.log())
        jobs = client(["jobs", "--socket", str(self.daemon.socket)])
        self.assertEqual(jobs.returncode, 0, jobs.stderr)
        self.assertIn("cat", jobs.stdout)
        self.assertEqual(report(self.daemon.socket, "cat")["modules"][0]["calls"], 20)


class LeftAloneFileTest(DaemonTestCase):
    """Rank files the daemon leaves alone (reliability campaign rerun, row 6): a symlink in the
    rank file's place and a newer daemon's file. Their ranks' new runs used to be refused
    forever (spooled, waiting for a daemon that never takes them)."""

    def test_new_runs_are_stored_beside_a_symlink_and_a_newer_daemons_file(self):
        self.daemon.start()
        before, again = 50, 7
        for rank in range(3):
            result = run_job(self.daemon.socket, "alone", [test_program("nvtx_phases"),
                                                           "--before", str(before)],
                             env=private_spool(self, rank_env(rank, 3)))
            self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.daemon.stop(), 0)
        link, newer = self.daemon.rank_file("alone", 1), self.daemon.rank_file("alone", 2)
        # Rank 1's file replaced by a link to a file that is not the daemon's to write.
        target = self.root / "passwd"
        target.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
        link.unlink()
        link.symlink_to(target)
        # Rank 2's file as a newer flopscoped left it.
        db = sqlite3.connect(newer)
        db.execute("UPDATE schema_version SET version = 99")
        db.commit()
        db.close()
        newer_bytes, target_bytes = newer.read_bytes(), target.read_bytes()

        self.daemon.start()
        for path, why in ((link, f"is a symbolic link to {target}"),
                          (newer, "is a newer flopscoped's file (schema version 99")):
            lines = [line for line in self.daemon.log().splitlines() if str(path) in line]
            self.assertEqual(len(lines), 1, self.daemon.log())
            self.assertIn(f"{path} {why}", lines[0])
            self.assertIn(f"left alone, and never written; its rank's new sessions are stored "
                          f"beside it in {path.with_suffix('.alt.sqlite')}", lines[0])

        for rank in (1, 2):
            result = run_job(self.daemon.socket, "alone", [test_program("nvtx_phases"),
                                                           "--before", str(again)],
                             env=private_spool(self, rank_env(rank, 3)), run_args=["--append"])
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertNotIn("spooled", result.stderr)  # stored now, not left waiting
        # Stored beside, each run once; the link's target and the newer file untouched.
        for path in (link, newer):
            # nvtx_phases --before N: N "before" ranges, each holding one "work" range.
            self.assertEqual(stored(path.with_suffix(".alt.sqlite"))[:2], (2 * again, 2 * again))
        self.assertEqual(target.read_bytes(), target_bytes)
        self.assertTrue(link.is_symlink())
        self.assertEqual(newer.read_bytes(), newer_bytes)

        # The reports hold the new data and name what was left alone.
        whole = report(self.daemon.socket, "alone")
        self.assertEqual(whole["modules"][0]["calls"], before + 2 * again)
        self.assertIn(f"rank 1: {link} is a symbolic link", whole["profile"]["partial"])
        self.assertIn(f"rank 2: {newer} is a newer flopscoped's file", whole["profile"]["partial"])
        self.assertEqual(report(self.daemon.socket, "alone", rank=1)["modules"][0]["calls"], again)
        ranks = client(["ranks", "alone", "--socket", str(self.daemon.socket)])
        self.assertEqual(ranks.returncode, 0, ranks.stderr)
        self.assertIn(f"Rank 1: {link} is a symbolic link to {target}", ranks.stdout)
        self.assertIn(f"Rank 2: {newer} is a newer flopscoped's file", ranks.stdout)
        # So does the timeline export, which reads the records stored beside.
        exported = client(["export", "alone", "-o", str(self.root / "alone.pftrace"),
                           "--socket", str(self.daemon.socket)])
        self.assertEqual(exported.returncode, 0, exported.stderr)
        self.assertIn(f"rank 1: {link} is a symbolic link to {target}", exported.stdout)
        self.assertIn(f"rank 2: {newer} is a newer flopscoped's file", exported.stdout)


def thread_nices(pid, name=None):
    """The nice value of every thread of `pid` (field 19 of /proc/PID/task/TID/stat); only the
    threads called `name` when given, or with `name=False` every thread but the ingest workers."""
    nices = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        if name is False and comm == INGEST_THREAD or name and comm != name:
            continue
        nices.append(int(fields[16]))  # fields[0] is field 3, the state
    return nices


# The Collector's ingest workers (daemon/ingest/ingest_workers.h, kIngestThreadName): the only
# threads of the daemon that run at the jobs' priority, for their whole life.
INGEST_THREAD = "flopscoped-ing"


class CpuPriorityTest(DaemonTestCase):

    @unittest.skipUnless(os.geteuid() == 0, "raising a priority needs CAP_SYS_NICE (root)")
    def test_every_thread_and_the_session_run_above_the_jobs_and_say_so(self):
        # setsid, as systemd, a pod or a launcher script start the daemon: it leads its session.
        self.daemon.prefix = ["setsid"]
        self.daemon.start(extra_args=["--log-level", "debug"])
        pid = self.daemon.process.pid
        nices = thread_nices(pid, name=False)
        self.assertGreater(len(nices), 3)  # gRPC's threads, started after main() raised it
        self.assertEqual(set(nices), {-10}, nices)
        autogroup = Path(f"/proc/{pid}/autogroup")
        if autogroup.exists():
            self.assertTrue(autogroup.read_text().strip().endswith(" nice -10"),
                            autogroup.read_text())
        self.assertIn("CPU priority: nice -10, its session's too", self.daemon.log())
        result = run_job(self.daemon.socket, "prio", [test_program("nvtx_phases"), "--before", "1"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(report(self.daemon.socket, "prio")["profile"]["world_size"], 1)

    @unittest.skipUnless(os.geteuid() == 0, "raising a priority needs CAP_SYS_NICE (root)")
    def test_ingest_runs_behind_the_queries_and_a_stream_holds_no_thread(self):
        self.daemon.prefix = ["setsid"]
        self.daemon.start()
        pid = self.daemon.process.pid
        before = len(thread_nices(pid))
        streams = 16
        done = threading.Event()

        def up(rank):
            yield collector_pb2.UpMessage(hello=hello("behind", rank, f"s-behind-{rank}"))
            done.wait(20)  # the streams stay open until the nice values are read

        with grpc.insecure_channel(f"unix:{self.daemon.socket}") as channel:
            call = channel.stream_stream(
                STREAM, request_serializer=collector_pb2.UpMessage.SerializeToString,
                response_deserializer=collector_pb2.DownMessage.FromString)
            calls = [call(up(rank), timeout=30) for rank in range(streams)]
            for responses in calls:
                self.assertTrue(next(responses).HasField("welcome"))
            during = thread_nices(pid)
            workers = thread_nices(pid, name=INGEST_THREAD)
            others = thread_nices(pid, name=False)
            done.set()
            for responses in calls:
                for _ in responses:
                    pass
        # The workers (which ran the streams' hellos) at the jobs' priority, every other thread
        # (gRPC's, which serve the queries too) above it.
        self.assertGreater(len(workers), 0, during)
        self.assertEqual(set(workers), {0}, during)
        self.assertEqual(set(others), {-10}, during)
        # The open streams wait on no thread of their own (callback API): gRPC's pool may grow
        # by a few threads under the calls, never by one per stream held.
        self.assertLess(len(during) - before, streams // 2, (before, during))

    def test_nice_0_leaves_the_priority_as_it_was(self):
        self.daemon.start(extra_args=["--nice", "0"])
        self.assertEqual(set(thread_nices(self.daemon.process.pid)), {os.getpriority(
            os.PRIO_PROCESS, 0)})
        self.assertNotIn("CPU priority", self.daemon.log())


class LogInjectionTest(DaemonTestCase):

    def test_newlines_and_escapes_in_client_names_stay_on_one_log_line(self):
        self.daemon.start()
        forged = "evil\nflopscoped: FORGED LOG LINE\x1b[2J"
        hello_stream(self.daemon.socket, hello("logjob", 0, "s-log\nflopscoped: FORGED TOO",
                                               host=forged))
        time.sleep(0.2)
        log = self.daemon.log()
        self.assertNotIn("\x1b", log)
        for line in log.splitlines():
            self.assertFalse(line.startswith("flopscoped: FORGED"), log)
        self.assertIn("FORGED LOG LINE", log)  # still there to read, on the real line


if __name__ == "__main__":
    unittest.main()
