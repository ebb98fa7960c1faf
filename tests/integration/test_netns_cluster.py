"""Three hosts in network namespaces (issue 17 item 3): an aggregator in its own namespace
serving mutual TLS on a private address, two node daemons in two more (each with its node
certificate and `--upstream AGGREGATOR:PORT`), all joined by veth pairs on a bridge in the
aggregator's namespace; a 4-rank job of examples/transformer_nvtx, two ranks per node, each rank
in its node's network namespace with its node's hostname. While the job runs the aggregator is
killed with SIGKILL and restarted on the same address, and one node's link is cut and restored.
At the end the aggregator, asked over the network with a person's certificate, shows world 4
with ranks from both hosts, and its files hold exactly the sessions and records each node
stored, none twice; a client with no certificate or one from another CA is refused.

The namespaces are made here and removed at the end, whatever happens. Needs CAP_NET_ADMIN (root,
as CI runs the suite); skips, with the reason, only where `ip netns add` is refused."""

import getpass
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import textwrap
import time

from harness import (Daemon, DaemonTestCase, calls_by_path, client, rank_env, tool)
from test_forwarding import MAKE_TEST_CA, waiting_in_outbox

JOB = "netns-job"
WORLD = 4
NODES = ("n1", "n2")
SUBNET = "10.77.0"  # private; it exists only inside the test's namespaces
AGGREGATOR_IP = f"{SUBNET}.1"
AGGREGATOR = f"{AGGREGATOR_IP}:7070"  # nothing else listens inside a fresh namespace
NODE_IP = {"n1": f"{SUBNET}.11", "n2": f"{SUBNET}.12"}
NODE_DEV = "eth0"  # each node's end of its veth pair, in the node's namespace

# Each rank: transformer_nvtx again and again (a session each) until the test says stop, so the
# job is running through every fault below however fast this machine is.
RANK_LOOP = 'while :; do "$2" --steps 40 --layers 1 --cpu || exit; [ -e "$1" ] && exit 0; done'
# Runs "$@" in a UTS namespace of its own named $0: the node's hostname in the ranks' sessions.
AS_HOST = 'hostname "$0" && exec "$@"'

# A TLS client that offers no certificate, from inside a node's namespace (the flopscope client
# refuses to try): the aggregator must fail its handshake.
NO_CERT_HANDSHAKE = textwrap.dedent("""
    import sys, grpc
    channel = grpc.secure_channel(sys.argv[1], grpc.ssl_channel_credentials(open(sys.argv[2], "rb").read()))
    try:
        grpc.channel_ready_future(channel).result(timeout=3)
    except grpc.FutureTimeoutError:
        sys.exit(0)
    sys.exit("the aggregator accepted a TLS client without a certificate")
""")


def ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def netns_refusal(name):
    """None when this process may make network namespaces, else why not."""
    if shutil.which("ip") is None:
        return "`ip` is not installed (Debian package iproute2: scripts/setup_deps.sh test set)"
    made = ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"`ip netns add` was refused ({made.stderr.strip()}): needs CAP_NET_ADMIN"
    ip("netns", "del", name)
    return None


def sessions(rank_file):
    """Every session of a rank file with its record counts, and the range events there as
    (rows, distinct (session, instance)): equal when nothing was stored twice (with range events
    kept raw: --keep-raw-steps 0)."""
    db = sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT session_id, world_size, last_seq, range_events, kernels, final "
                          "FROM sessions ORDER BY session_id").fetchall()
        events = db.execute("SELECT COUNT(*), COUNT(DISTINCT sid || ':' || instance_id) "
                            "FROM range_events").fetchone()
        return rows, events
    finally:
        db.close()


class NetnsClusterTest(DaemonTestCase):

    def setUp(self):
        super().setUp()
        tag = f"fs{os.getpid()}"
        self.ns = {"agg": f"{tag}-agg", **{node: f"{tag}-{node}" for node in NODES}}
        refusal = netns_refusal(f"{tag}-probe")
        if refusal is not None:
            self.skipTest(f"cannot make network namespaces here: {refusal}")
        if shutil.which("openssl") is None:
            self.fail("openssl is not installed (scripts/setup_deps.sh test installs it)")
        self.jobs = []
        self.make_network()
        self.certs = self.root / "certs"
        self.person = f"person-{getpass.getuser()}"
        subprocess.run([str(MAKE_TEST_CA), str(self.certs), "--san", f"IP:{AGGREGATOR_IP}",
                        "--person", getpass.getuser()],
                       check=True, capture_output=True, timeout=60)
        self.aggregator = self.daemon_in("agg", "aggregator")
        self.nodes = {node: self.daemon_in(node, node) for node in NODES}

    def tearDown(self):
        try:
            for job in self.jobs:
                if job.poll() is None:
                    job.kill()
                    job.communicate()
            for daemon in [*self.nodes.values(), self.aggregator]:
                rc = daemon.stop()
                if rc is not None:
                    self.assertEqual(rc, 0, f"exit code on SIGTERM:\n{daemon.log()}")
        finally:
            super().tearDown()  # the namespaces go after this, in the cleanups

    def make_network(self):
        """A bridge in the aggregator's namespace; each node joined to it by a veth pair."""
        for name in self.ns.values():
            ip("netns", "add", name)
            self.addCleanup(ip, "netns", "del", name, check=False)
            ip("-n", name, "link", "set", "lo", "up")
        agg = self.ns["agg"]
        ip("-n", agg, "link", "add", "br0", "type", "bridge")
        ip("-n", agg, "addr", "add", f"{AGGREGATOR_IP}/24", "dev", "br0")
        ip("-n", agg, "link", "set", "br0", "up")
        for node in NODES:
            port = f"to-{node}"
            ip("link", "add", NODE_DEV, "netns", self.ns[node], "type", "veth", "peer", "name",
               port, "netns", agg)
            ip("-n", agg, "link", "set", port, "master", "br0", "up")
            ip("-n", self.ns[node], "addr", "add", f"{NODE_IP[node]}/24", "dev", NODE_DEV)
            ip("-n", self.ns[node], "link", "set", NODE_DEV, "up")

    def daemon_in(self, where, name):
        folder = self.root / name
        folder.mkdir()
        daemon = Daemon(folder)
        daemon.args += ["--keep-raw-steps", "0"]  # every range event stays raw, to be counted
        daemon.prefix = ["ip", "netns", "exec", self.ns[where]]  # it execs: the pid is the daemon's
        return daemon

    def tls(self, name):
        return ["--tls-cert", str(self.certs / f"{name}.pem"),
                "--tls-key", str(self.certs / f"{name}.key"), "--tls-ca", str(self.certs / "ca.pem")]

    def start_aggregator(self):
        self.aggregator.start(extra_args=["--tcp", AGGREGATOR, *self.tls("daemon")])

    def in_ns(self, where, argv):
        return ["ip", "netns", "exec", self.ns[where], *argv]

    def start_rank(self, rank, stop):
        node = NODES[rank * len(NODES) // WORLD]  # ranks 0, 1 on n1; 2, 3 on n2
        # A batch every 20 ms: sessions of many batches, cut off mid-session by the faults.
        env = dict(os.environ, **rank_env(rank, WORLD, local_rank=rank % 2),
                   FLOPSCOPE_SPOOL_DIR=str(self.root / "spool"), FLOPSCOPE_FLUSH_MS="20")
        argv = self.in_ns(node, [
            "unshare", "--uts", "sh", "-c", AS_HOST, f"host-{node}",
            tool("flopscope"), "run", "--job", JOB, "--socket", str(self.nodes[node].socket), "--",
            "sh", "-c", RANK_LOOP, "rank-loop", str(stop), tool("transformer_nvtx")])
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)

    def over_network(self, args, cert, where="n2"):
        """`flopscope ARGS --server AGGREGATOR` from a node's namespace with `cert` (or none)."""
        tls = [] if cert is None else [
            "--tls-cert", str(self.certs / f"{cert}.pem"), "--tls-key",
            str(self.certs / f"{cert}.key"), "--tls-ca", str(self.certs / "ca.pem")]
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOPSCOPE_TLS_")}
        return subprocess.run(self.in_ns(where, [tool("flopscope"), *args, "--server", AGGREGATOR,
                                                 *tls]),
                              capture_output=True, text=True, timeout=60, env=env)

    def logs(self):
        return "\n".join(f"--- {name}\n{daemon.log()[-4000:]}" for name, daemon in
                         [("aggregator", self.aggregator), *self.nodes.items()])

    def wait_until(self, condition, what, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                self.fail(f"no {what} within {timeout}s:\n{self.logs()}")
            for rank, job in enumerate(self.jobs):
                if job.poll() is not None:
                    self.fail(f"rank {rank} ended early ({job.returncode}) while waiting for "
                              f"{what}: {job.stderr.read()}")
            time.sleep(0.1)

    def aggregator_ranges(self, ranks=range(WORLD)):
        """Range events the aggregator holds of `ranks`, asked over its unix socket."""
        result = client(["ranks", JOB, "--socket", str(self.aggregator.socket), "--format", "json"])
        if result.returncode != 0:
            return 0
        return sum(r["ranges"] for r in json.loads(result.stdout)["ranks"] if r["rank"] in ranks)

    def aggregator_has_every_rank(self):
        result = client(["ranks", JOB, "--socket", str(self.aggregator.socket), "--format", "json"])
        return (result.returncode == 0 and
                len(json.loads(result.stdout)["ranks"]) == WORLD)

    def test_aggregator_killed_and_link_cut_mid_job_end_exact(self):
        self.start_aggregator()
        for daemon in self.nodes.values():
            daemon.start(extra_args=["--upstream", AGGREGATOR, *self.tls("node")])
        stop = self.root / "stop"
        self.jobs = [self.start_rank(rank, stop) for rank in range(WORLD)]
        self.wait_until(self.aggregator_has_every_rank, "ranks from both nodes on the aggregator")

        # kill -9 mid-job: the nodes keep what the ranks send in their outboxes meanwhile.
        killed = self.aggregator.process
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        self.aggregator._log.close()
        self.wait_until(lambda: all(waiting_in_outbox(n) > 0 for n in self.nodes.values()),
                        "batches waiting on both nodes for the killed aggregator")
        self.start_aggregator()
        held = self.aggregator_ranges()
        self.wait_until(lambda: self.aggregator_ranges() > held,
                        "forwarding resumed to the restarted aggregator")

        # n1's link cut: its batches wait while n2's still arrive; then the link comes back.
        n1_ranks, n2_ranks = (0, 1), (2, 3)
        ip("-n", self.ns["n1"], "link", "set", NODE_DEV, "down")
        self.wait_until(lambda: waiting_in_outbox(self.nodes["n1"]) > 0,
                        "batches waiting on n1, cut off")
        time.sleep(2)  # a few of the forwarder's retries hit the dead link
        cut_off, reachable = self.aggregator_ranges(n1_ranks), self.aggregator_ranges(n2_ranks)
        self.wait_until(lambda: self.aggregator_ranges(n2_ranks) > reachable,
                        "n2's records arriving while n1 is cut off")
        self.assertGreater(waiting_in_outbox(self.nodes["n1"]), 0, self.logs())
        ip("-n", self.ns["n1"], "link", "set", NODE_DEV, "up")
        self.wait_until(lambda: self.aggregator_ranges(n1_ranks) > cut_off,
                        "n1's records arriving again once its link is back")

        stop.touch()
        for rank, job in enumerate(self.jobs):
            _, err = job.communicate(timeout=120)
            self.assertEqual(job.returncode, 0, f"rank {rank}: {err}")
            self.assertNotIn("not delivered", err, f"rank {rank}")
        self.jobs = []  # ended as they should: wait_until must not take that for an early end
        self.wait_until(lambda: all(waiting_in_outbox(n) == 0 for n in self.nodes.values()),
                        "empty outboxes", timeout=60)
        self.assert_exactly_what_the_nodes_stored()
        self.assert_whole_job_over_the_network()
        self.assert_refused_without_a_valid_certificate()

    def assert_exactly_what_the_nodes_stored(self):
        for rank in range(WORLD):
            node = self.nodes[NODES[rank * len(NODES) // WORLD]]
            here = sessions(node.rank_file(JOB, rank))
            there = sessions(self.aggregator.rank_file(JOB, rank))
            rows, (events, distinct) = here
            self.assertGreaterEqual(len(rows), 2, f"rank {rank}: a session per loop at least twice")
            self.assertTrue(all(final == 1 for *_, final in rows), rows)
            self.assertEqual(events, distinct, f"rank {rank}: the node stored an event twice")
            self.assertEqual(events, sum(row[3] for row in rows), f"rank {rank}")
            self.assertEqual(there, here, f"rank {rank}: the aggregator lost or doubled records")

    def assert_whole_job_over_the_network(self):
        listed = self.over_network(["ranks", JOB, "--format", "json"], self.person)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        ranks = json.loads(listed.stdout)["ranks"]
        self.assertEqual([(r["rank"], r["world_size"], r["host"]) for r in ranks],
                         [(0, 4, "host-n1"), (1, 4, "host-n1"), (2, 4, "host-n2"),
                          (3, 4, "host-n2")])
        for row in ranks:
            rows, (events, _) = sessions(self.aggregator.rank_file(JOB, row["rank"]))
            self.assertEqual((row["ranges"], row["lost"], row["sessions"]), (events, 0, len(rows)))
        whole = self.over_network(["report", JOB, "--format", "json"], self.person)
        self.assertEqual(whole.returncode, 0, whole.stderr)
        by_node = [calls_by_path(self.node_report(node)) for node in self.nodes.values()]
        expected = {path: sum(r.get(path, 0) for r in by_node) for path in set().union(*by_node)}
        self.assertTrue(expected)
        self.assertEqual(calls_by_path(json.loads(whole.stdout)), expected)

    def node_report(self, node):
        result = client(["report", JOB, "--socket", str(node.socket), "--format", "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def assert_refused_without_a_valid_certificate(self):
        unsigned = self.over_network(["ranks", JOB], None)
        self.assertEqual(unsigned.returncode, 2, unsigned.stderr)
        self.assertIn("only over mutual TLS", unsigned.stderr)
        foreign = self.over_network(["ranks", JOB], "other-person")
        self.assertNotEqual(foreign.returncode, 0, foreign.stdout)
        self.assertIn("over mutual TLS", foreign.stderr)
        self.assertIn("--tls-ca", foreign.stderr)
        bare = subprocess.run(self.in_ns("n2", ["/usr/bin/python3", "-c", NO_CERT_HANDSHAKE,
                                                AGGREGATOR, str(self.certs / "ca.pem")]),
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(bare.returncode, 0, bare.stderr)


if __name__ == "__main__":
    import unittest
    unittest.main()
