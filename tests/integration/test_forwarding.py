"""Node daemons forwarding to an aggregator (issue 17, item 1): two node daemons with
`--upstream unix:<aggregator socket>`, a 4-rank job split 2+2 across them, and the aggregator's
`ranks`, `report`, `report --group dp` and `diff` covering all four ranks with exactly the
records the nodes stored, through a kill -9 of the aggregator mid-job and an aggregator that is
not there until the job is over; and an orphaned spool file a node daemon delivers is forwarded
too."""

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from harness import (TEST_BIN_DIR, Daemon, DaemonTestCase, calls_by_path, client, rank_env, report,
                     run_job, start_job, test_program)
from test_daemon_faults import private_spool, stored
from test_orphan_spools import PROGRAM as PUSH_POP_PROGRAM

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

    def start_nodes(self, upstream=None, tls=()):
        for node in self.nodes:
            node.start(extra_args=["--upstream", upstream or f"unix:{self.aggregator.socket}",
                                   *tls])

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
        self.start_nodes()  # the aggregator is not there yet: everything waits in the outboxes
        events = 2 * 300
        self.finish(self.start_ranks([test_program("nvtx_phases"), "--before", "300"]))
        self.assertGreater(waiting_in_outbox(self.nodes[0]), 0, self.nodes[0].log())
        for node in self.nodes:  # a restart of the node daemons, outboxes full
            self.assertEqual(node.stop(), 0, node.log())
        self.aggregator.start()
        self.start_nodes()
        self.wait_forwarded()
        self.assert_aggregator_has_every_rank(events)

    def test_an_orphaned_spool_a_node_delivers_is_forwarded(self):
        spool = self.root / "spool"
        ranges = 250
        left = run_job(self.root / "nobody.sock", "orphan",
                       ["/usr/bin/python3", "-c", PUSH_POP_PROGRAM,
                        str(TEST_BIN_DIR / "libnvtx_pyhelper.so"), str(ranges)],
                       env={"FLOPSCOPE_SPOOL_DIR": str(spool)}, timeout=60)
        self.assertEqual(left.returncode, 0, left.stderr)
        self.assertEqual(len(list(spool.glob("*.spool"))), 1, left.stderr)
        self.aggregator.start()
        node = self.nodes[0]
        node.start(extra_args=["--upstream", f"unix:{self.aggregator.socket}",
                               "--collect-spools", str(spool)])
        deadline = time.monotonic() + 20
        while list(spool.glob("*.spool")) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(list(spool.glob("*.spool")), [], node.log())
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
