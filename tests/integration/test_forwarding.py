"""Node daemons forwarding to an aggregator (issue 17, item 1): two node daemons with
`--upstream unix:<aggregator socket>`, a 4-rank job split 2+2 across them, and the aggregator's
`ranks`, `report`, `report --group dp` and `diff` covering all four ranks with exactly the
records the nodes stored, through a kill -9 of the aggregator mid-job and an aggregator that is
not there until the job is over (the nodes' /metrics showing the outbox and a lag that grows,
then 0); an orphaned spool file a node daemon delivers is forwarded too; and `flopscope profile`
on the aggregator reaches the running ranks on both nodes through each session's one stream
upstream, for the job's owner only."""

import getpass
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import time
import urllib.request
from pathlib import Path

from harness import (TEST_BIN_DIR, Daemon, DaemonTestCase, calls_by_path, client, rank_env, report,
                     run_job, start_job, test_program, user_exists)
from test_daemon_faults import private_spool, stored
from test_orphan_spools import PROGRAM as PUSH_POP_PROGRAM
from test_profile_window import parse_profile_answers

MAKE_TEST_CA = Path(__file__).resolve().parents[2] / "deploy" / "tls" / "make_test_ca.sh"
JOB = "fwd"
WORLD = 4


def waiting_in_outbox(node):
    """Batches a node daemon still holds for the aggregator (0 when it has no outbox yet)."""
    path = node.data_dir / "outbox.sqlite"
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM outbox_batches").fetchone()[0]
    finally:
        db.close()


def forward_metrics(daemon):
    """The flopscope_forward_* samples of a daemon started with --metrics 127.0.0.1:0."""
    found = re.search(r"metrics on http://([0-9.]+:[0-9]+)/metrics", daemon.log())
    assert found, daemon.log()
    with urllib.request.urlopen(f"http://{found.group(1)}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {name: float(value) for name, value in
            re.findall(r"^(flopscope_forward_\w+) (\S+)$", text, re.MULTILINE)}


class ForwardingTest(DaemonTestCase):

    def setUp(self):
        super().setUp()
        self.aggregator = Daemon(self.mkdir("aggregator"))
        self.nodes = [Daemon(self.mkdir(f"node{i}")) for i in (1, 2)]

    def tearDown(self):
        try:
            for daemon in [*self.nodes, self.aggregator]:
                rc = daemon.stop()
                if rc is not None:
                    self.assertEqual(rc, 0, f"exit code on SIGTERM:\n{daemon.log()}")
        finally:
            super().tearDown()

    def mkdir(self, name):
        path = self.root / name
        path.mkdir()
        return path

    def start_nodes(self, upstream=None, tls=(), extra_args=()):
        for node in self.nodes:
            node.start(extra_args=["--upstream", upstream or f"unix:{self.aggregator.socket}",
                                   *tls, *extra_args])

    def node_of(self, rank):
        return self.nodes[rank * len(self.nodes) // WORLD]  # ranks 0, 1 on node 1; 2, 3 on node 2

    def start_ranks(self, command):
        return [start_job(self.node_of(rank).socket, JOB, command,
                          env=private_spool(self, rank_env(rank, WORLD, local_rank=rank % 2)))
                for rank in range(WORLD)]

    def finish(self, jobs):
        for rank, job in enumerate(jobs):
            _, err = job.communicate(timeout=120)
            self.assertEqual(job.returncode, 0, f"rank {rank}: {err}")
            self.assertNotIn("not delivered", err, f"rank {rank}")

    def wait_forwarded(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(waiting_in_outbox(node) == 0 for node in self.nodes):
                return
            time.sleep(0.1)
        self.fail("batches still wait in the outboxes:\n" +
                  "\n".join(node.log() for node in self.nodes) + self.aggregator.log())

    def assert_aggregator_has_every_rank(self, per_rank_events):
        """The aggregator's rank files hold exactly what each node stored, once, and its
        `ranks` and `report` answer for the whole job."""
        node_reports = []
        for rank in range(WORLD):
            node = self.node_of(rank)
            here = stored(node.rank_file(JOB, rank))
            self.assertEqual(here, (per_rank_events, per_rank_events, 0), f"node, rank {rank}")
            there = stored(self.aggregator.rank_file(JOB, rank))
            self.assertEqual(there, here, f"aggregator, rank {rank}: lost or stored twice")
        for node in self.nodes:
            node_reports.append(calls_by_path(report(node.socket, JOB)))
        ranks = json.loads(client(["ranks", JOB, "--socket", str(self.aggregator.socket),
                                   "--format", "json"]).stdout)["ranks"]
        self.assertEqual(sorted(r["rank"] for r in ranks), list(range(WORLD)))
        for row in ranks:
            self.assertEqual((row["rank"], row["ranges"], row["lost"]),
                             (row["rank"], per_rank_events, 0))
        whole = report(self.aggregator.socket, JOB)
        self.assertEqual(sorted(r["rank"] for r in whole["ranks"]), list(range(WORLD)))
        expected = {path: sum(r.get(path, 0) for r in node_reports)
                    for path in set().union(*node_reports)}
        self.assertEqual(calls_by_path(whole), expected)
        # Data-parallel spread: every rank is a replica here (no model parallelism announced).
        spread = self.aggregator_json("report", JOB, "--group", "dp")["dp_spread"]
        self.assertEqual({(row["path"], row["replicas"]) for row in spread},
                         {(path, WORLD) for path in expected})
        # `diff` answers there too: the job against itself, every module the same.
        compared = self.aggregator_json("diff", JOB, JOB)["modules"]
        self.assertEqual({row["path"] for row in compared}, set(expected))
        for row in compared:
            self.assertEqual(row["latency_s_a"], row["latency_s_b"], row)

    def aggregator_json(self, *args):
        result = client([*args, "--socket", str(self.aggregator.socket), "--format", "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def test_aggregator_killed_mid_job_ends_with_exact_counts(self):
        self.aggregator.start()
        self.start_nodes()
        go = self.root / "go"
        before, after = 5000, 5000
        jobs = self.start_ranks([test_program("nvtx_phases"), "--before", str(before),
                                 "--wait-file", str(go), "--after", str(after)])
        time.sleep(0.5)  # the ranks are streaming "before" ranges, the nodes forwarding them
        killed = self.aggregator.process
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        self.aggregator._log.close()
        go.touch()  # the "after" half is committed on the nodes while the aggregator is gone
        self.finish(jobs)
        for node in self.nodes:
            self.assertGreater(waiting_in_outbox(node), 0, node.log())
        self.aggregator.start()
        self.wait_forwarded()
        # Each "before" and "after" call is two range events (the outer range and its "work").
        self.assert_aggregator_has_every_rank(2 * (before + after))

    def test_an_outage_then_a_node_restart_resumes_from_the_outbox(self):
        metrics = ["--metrics", "127.0.0.1:0"]
        self.start_nodes(extra_args=metrics)  # no aggregator yet: everything waits in outboxes
        events = 2 * 300
        self.finish(self.start_ranks([test_program("nvtx_phases"), "--before", "300"]))
        node = self.nodes[0]
        waiting = waiting_in_outbox(node)
        self.assertGreater(waiting, 0, node.log())
        # /metrics says what the outbox holds, and the lag grows while the aggregator is away.
        first = forward_metrics(node)
        self.assertEqual(first["flopscope_forward_outbox_batches"], waiting)
        self.assertGreater(first["flopscope_forward_outbox_bytes"], 0)
        self.assertEqual(first["flopscope_forward_streams_connected"], 0)
        self.assertGreater(first["flopscope_forward_lag_seconds"], 0)
        time.sleep(1.0)
        later = forward_metrics(node)
        self.assertGreaterEqual(later["flopscope_forward_lag_seconds"],
                                first["flopscope_forward_lag_seconds"] + 0.9)
        for daemon in self.nodes:  # a restart of the node daemons, outboxes full
            self.assertEqual(daemon.stop(), 0, daemon.log())
        self.start_nodes(extra_args=metrics)
        # The batches' put times are in the outbox: the lag goes on from where it was.
        self.assertGreater(forward_metrics(node)["flopscope_forward_lag_seconds"],
                           later["flopscope_forward_lag_seconds"])
        self.aggregator.start()
        self.wait_forwarded()
        self.assert_aggregator_has_every_rank(events)
        for daemon in self.nodes:
            self.assertEqual(forward_metrics(daemon), {
                "flopscope_forward_outbox_batches": 0, "flopscope_forward_outbox_bytes": 0,
                "flopscope_forward_dropped_batches_total": 0, "flopscope_forward_lag_seconds": 0,
                "flopscope_forward_streams_connected": 0}, daemon.log())

    def test_an_orphaned_spool_a_node_delivers_is_forwarded(self):
        spool = self.root / "spool"
        ranges = 250
        left = run_job(self.root / "nobody.sock", "orphan",
                       ["/usr/bin/python3", "-c", PUSH_POP_PROGRAM,
                        str(TEST_BIN_DIR / "libnvtx_pyhelper.so"), str(ranges)],
                       env={"FLOPSCOPE_SPOOL_DIR": str(spool)}, timeout=60)
        self.assertEqual(left.returncode, 0, left.stderr)
        self.assertEqual(len(list(spool.glob("*/*.spool"))), 1, left.stderr)
        self.aggregator.start()
        node = self.nodes[0]
        node.start(extra_args=["--upstream", f"unix:{self.aggregator.socket}",
                               "--collect-spools", str(spool),
                               "--collect-spools-for", str(self.root / "nobody.sock")])
        deadline = time.monotonic() + 20
        while list(spool.glob("*/*.spool")) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(list(spool.glob("*/*.spool")), [], node.log())
        self.wait_forwarded()
        here = calls_by_path(report(node.socket, "orphan"))
        self.assertEqual(here.get("work"), ranges, here)
        self.assertEqual(calls_by_path(report(self.aggregator.socket, "orphan")), here)

    def test_forwarding_over_mutual_tls_with_a_node_certificate(self):
        if shutil.which("openssl") is None:
            self.fail("openssl is not installed (scripts/setup_deps.sh test installs it)")
        certs = self.root / "certs"
        subprocess.run([str(MAKE_TEST_CA), str(certs)], check=True, capture_output=True,
                       timeout=60)

        def tls(name):
            return ["--tls-cert", str(certs / f"{name}.pem"), "--tls-key",
                    str(certs / f"{name}.key"), "--tls-ca", str(certs / "ca.pem")]

        self.aggregator.start(extra_args=["--tcp", "127.0.0.1:0", *tls("daemon")])
        found = re.search(r"mutual TLS on (\S+)", self.aggregator.log())
        self.assertIsNotNone(found, self.aggregator.log())
        self.start_nodes(upstream=found.group(1), tls=tls("node"))
        events = 2 * 200
        self.finish(self.start_ranks([test_program("nvtx_phases"), "--before", "200"]))
        self.wait_forwarded()
        self.assert_aggregator_has_every_rank(events)

    def wait_connected_upstream(self, timeout=30.0):
        """Until the aggregator lists every rank of the job as connected: each node keeps one
        stream upstream open per session that is live there."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = client(["jobs", "--socket", str(self.aggregator.socket), "--format", "json"])
            if listed.returncode == 0:
                jobs = {j["job"]: j for j in json.loads(listed.stdout)["jobs"]}
                if jobs.get(JOB, {}).get("connected", 0) >= WORLD:
                    return
            time.sleep(0.1)
        self.fail("the aggregator never saw every rank connected:\n" + self.aggregator.log() +
                  "\n".join(node.log() for node in self.nodes))

    def test_profile_on_the_aggregator_reaches_ranks_on_every_node(self):
        if shutil.which("openssl") is None:
            self.fail("openssl is not installed (scripts/setup_deps.sh test installs it)")
        me = getpass.getuser()
        other = "nobody" if me != "nobody" else "root"
        certs = self.root / "certs"
        subprocess.run([str(MAKE_TEST_CA), str(certs), "--person", me, "--person", other],
                       check=True, capture_output=True, timeout=60)
        self.aggregator.start(extra_args=[
            "--tcp", "127.0.0.1:0", "--tls-cert", str(certs / "daemon.pem"),
            "--tls-key", str(certs / "daemon.key"), "--tls-ca", str(certs / "ca.pem")])
        server = re.search(r"mutual TLS on (\S+)", self.aggregator.log()).group(1)

        def profile(person):
            """`flopscope profile` on the aggregator with `person`'s certificate."""
            return client(["profile", JOB, "--count", "2", "--server", server,
                           "--tls-cert", str(certs / f"person-{person}.pem"),
                           "--tls-key", str(certs / f"person-{person}.key"),
                           "--tls-ca", str(certs / "ca.pem")])

        self.start_nodes(extra_args=["--metrics", "127.0.0.1:0"])
        go = self.root / "go"
        # Each rank pushes its first ranges, then waits for `go`, connected to its node.
        jobs = self.start_ranks([test_program("nvtx_phases"), "--before", "3", "--wait-file",
                                 str(go), "--after", "2", "--timeout-ms", "120000"])
        try:
            self.wait_connected_upstream()
            for node in self.nodes:  # one stream upstream per live session
                self.assertEqual(forward_metrics(node)["flopscope_forward_streams_connected"],
                                 WORLD // len(self.nodes), node.log())
            result = profile(me)
            answers, accepted, asked = parse_profile_answers(self, result)
            self.assertEqual([rank for rank, _, _ in answers], list(range(WORLD)), result.stdout)
            self.assertEqual(asked, WORLD)
            self.assertEqual(accepted, sum(verdict == "accepted" for _, verdict, _ in answers))
            self.assertEqual(result.returncode, 0 if accepted else 1, result.stderr)
            for rank, verdict, message in answers:
                if verdict == "refused":
                    # The process said why (no GPU here): its own reason, relayed by its node.
                    self.assertTrue(message, result.stdout)
                    self.assertNotIn("no reply within", message)
                    self.assertNotIn("not connected", message)
            # Each node relayed the controls of its own ranks, once each.
            for node in self.nodes:
                relayed = re.findall(rf"relayed control \d+ to job {JOB} rank (\d+) ", node.log())
                self.assertEqual(sorted(int(rank) for rank in relayed),
                                 [r for r in range(WORLD) if self.node_of(r) is node], node.log())
            self.assertIn(f"counter window for job {JOB}: {accepted} of {WORLD} ranks accepted",
                          self.aggregator.log())
            # Another person's certificate has that person's rights there: not this job's.
            if user_exists(other):
                denied = profile(other)
                self.assertNotEqual(denied.returncode, 0, denied.stdout)
                self.assertIn(f"may not open counter windows in job {JOB}", denied.stderr)
        finally:
            go.touch()
        self.finish(jobs)
        self.wait_forwarded()
        self.assert_aggregator_has_every_rank(2 * (3 + 2))
        # One stream per session for its whole life: the aggregator saw each connect once.
        for rank in range(WORLD):
            self.assertEqual(len(re.findall(rf"(?<!dis)connected job {JOB} rank {rank} ",
                                            self.aggregator.log())), 1, self.aggregator.log())


class NodeAndAggregatorCase(DaemonTestCase):
    """A node daemon and an aggregator, each in a directory of its own, both stopped at the end
    (a stopped aggregator is continued first, so that it can stop)."""

    def setUp(self):
        super().setUp()
        (self.root / "aggregator").mkdir()
        (self.root / "node").mkdir()
        self.aggregator = Daemon(self.root / "aggregator")
        self.node = Daemon(self.root / "node")

    def tearDown(self):
        try:
            if self.aggregator.process is not None and self.aggregator.process.poll() is None:
                self.aggregator.process.send_signal(signal.SIGCONT)
            self.node.stop()
            self.aggregator.stop()
        finally:
            super().tearDown()


class UpstreamDrainTest(NodeAndAggregatorCase):
    """--upstream-drain-s, for node daemons that never start again on their data dir (a Slurm
    job's, deploy/slurm): SIGTERM keeps forwarding until the outbox is empty, for so long."""

    CALLS = 100

    def job_waiting_on_the_node(self, drain_s):
        self.node.start(extra_args=["--upstream", f"unix:{self.aggregator.socket}",
                                    "--upstream-drain-s", str(drain_s)])
        done = run_job(self.node.socket, JOB,
                       [test_program("nvtx_phases"), "--before", str(self.CALLS)],
                       env=private_spool(self, rank_env(0, 1)))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertGreater(waiting_in_outbox(self.node), 0, self.node.log())
        self.node.process.send_signal(signal.SIGTERM)

    def node_exit(self, timeout):
        rc = self.node.process.wait(timeout)
        self.node._log.close()
        return rc

    def test_sigterm_forwards_what_waits_to_an_aggregator_that_comes_back(self):
        self.job_waiting_on_the_node(drain_s=60)
        time.sleep(1)
        self.assertIsNone(self.node.process.poll(), "SIGTERM returned with batches waiting")
        self.aggregator.start()
        self.assertEqual(self.node_exit(timeout=30), 0, self.node.log())
        self.assertIn(f"forwarded every batch to unix:{self.aggregator.socket}", self.node.log())
        self.assertEqual(waiting_in_outbox(self.node), 0)
        here = stored(self.node.rank_file(JOB, 0))
        events = 2 * self.CALLS  # each call: its range and the "work" inside
        self.assertEqual(here, (events, events, 0))
        self.assertEqual(stored(self.aggregator.rank_file(JOB, 0)), here)

    def test_sigterm_gives_up_after_the_drain_time(self):
        self.job_waiting_on_the_node(drain_s=1)
        started = time.monotonic()
        self.assertEqual(self.node_exit(timeout=20), 0, self.node.log())
        self.assertGreaterEqual(time.monotonic() - started, 1)
        self.assertRegex(self.node.log(), r"\d+ batches still wait for unix:.*--upstream-drain-s")
        self.assertGreater(waiting_in_outbox(self.node), 0)


class OutboxDropsTest(NodeAndAggregatorCase):
    """Row 7c of the reliability campaign (issue 34): batches a node's full outbox drops while
    the aggregator is stopped are counted where the job is read, by cause, and the session whose
    final batch the node dropped is not said to have ended without one."""

    CALLS = 40000  # two range events each: some MB of batches, far more than the 1 MB outbox

    def test_batches_a_full_outbox_drops_are_lost_by_cause_at_the_aggregator(self):
        self.aggregator.start()
        self.node.start(extra_args=["--upstream", f"unix:{self.aggregator.socket}",
                                    "--outbox-max-mb", "1", "--metrics", "127.0.0.1:0"])
        self.aggregator.process.send_signal(signal.SIGSTOP)
        try:
            done = run_job(self.node.socket, JOB,
                           [test_program("nvtx_phases"), "--before", str(self.CALLS)],
                           env=private_spool(self, rank_env(0, 1)))
            self.assertEqual(done.returncode, 0, done.stderr)
            dropped = forward_metrics(self.node)["flopscope_forward_dropped_batches_total"]
            self.assertGreater(dropped, 0, self.node.log())
        finally:
            self.aggregator.process.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 45
        while waiting_in_outbox(self.node) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(waiting_in_outbox(self.node), 0, self.node.log())
        here = stored(self.node.rank_file(JOB, 0))[0]
        self.assertEqual(here, 2 * self.CALLS)  # the node keeps every record
        there = stored(self.aggregator.rank_file(JOB, 0))[0]
        self.assertLess(there, here)
        # The aggregator counts what it lacks, as the node's drops, for this rank; its listing
        # catches up with the stub's commit within a moment.
        deadline = time.monotonic() + 10
        while True:
            listed = {j["job"]: j for j in json.loads(client(
                ["jobs", "--socket", str(self.aggregator.socket), "--format", "json"]).stdout)["jobs"]}
            if listed[JOB]["lost"] == here - there or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(listed[JOB]["lost"], here - there, self.aggregator.log())
        rank = json.loads(client(["ranks", JOB, "--socket", str(self.aggregator.socket),
                                  "--format", "json"]).stdout)["ranks"][0]
        self.assertEqual((rank["lost"], rank["sessions_without_final"]), (here - there, 0))
        whole = report(self.aggregator.socket, JOB)
        self.assertEqual(whole["losses"], {"forward_dropped": here - there})
        self.assertEqual(whole["sessions_without_final"], 0)
        text = client(["report", JOB, "--socket", str(self.aggregator.socket)]).stdout
        self.assertIn("forwarding outbox", text)
        self.assertNotIn("killed, _exit or exec", text)
