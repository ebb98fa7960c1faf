"""deploy/slurm on a real Slurm: Debian's munged, slurmctld and two slurmd (nodes n1 and n2 on
this host, each on its own port, NodeHostname=localhost), all started here from a temp config
dir with ports of their own, and stopped at the end. A 4-rank `srun -N2 -n4` job runs under the
injector, submitted by an ordinary user (nobody); the Prolog starts a daemon per node as that
user, the TaskProlog points each task at its node's daemon, the Epilog stops them. Each node's
data then holds its 2 ranks of world size 4, the ranks 0-1 on n1 and 2-3 on n2.

One aggregator for the cluster, started by the test with mutual TLS on 127.0.0.1: the conf's
`upstream` makes the Prolog start each node daemon with --upstream and copies of the job user's
certificate (CN=nobody), the Epilog's SIGTERM lets it forward what still waits, and the
aggregator, asked with the user's certificate, reports world 4 with every rank: each the same
sessions and record counts as the node that ran it. Skips, with the reason, only where the Slurm
or munge packages are missing (scripts/setup_deps.sh test set installs them) or the test does
not run as root."""

import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from harness import BUILD_DIR, Daemon, calls_by_path, client, tool
from test_forwarding import MAKE_TEST_CA
from test_netns_cluster import sessions

REPO = Path(__file__).resolve().parents[2]
SLURM_SCRIPTS = REPO / "deploy" / "slurm"
NODES = ("n1", "n2")
PROGRAMS = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol")


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def slurm_conf(root, ports):
    ctld, n1, n2 = ports
    scripts = root / "slurm-scripts"
    lines = [
        "ClusterName=flopscopetest",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={ctld}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root}/munge/munge.sock",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/slurmctld.log",
        f"SlurmdLogFile={root}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SlurmdParameters=config_overrides",
        "MpiDefault=none",
        "ReturnToService=2",
        "PrologFlags=Alloc",
        f"Prolog={scripts}/prolog.sh",
        f"Epilog={scripts}/epilog.sh",
        f"TaskProlog={scripts}/task_prolog.sh",
        f"NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n1} CPUs=2 State=UNKNOWN",
        f"NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n2} CPUs=2 State=UNKNOWN",
        "PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP",
    ]
    path = root / "slurm.conf"
    path.write_text("\n".join(lines) + "\n")
    return path


def install_scripts(root, upstream, certs):
    """deploy/slurm as an operator installs it, the settings pointed at the build and temp dirs,
    the aggregator at `upstream` and the certificates in `certs` (a person's per user)."""
    scripts = root / "slurm-scripts"
    scripts.mkdir()
    for name in ("prolog.sh", "epilog.sh", "task_prolog.sh"):
        shutil.copy2(SLURM_SCRIPTS / name, scripts / name)
    conf = (SLURM_SCRIPTS / "flopscope-slurm.conf").read_text()
    settings = {"prefix": BUILD_DIR, "run_root": root / "run", "data_root": root / "data",
                "upstream": upstream, "tls_cert": certs / "person-%u.pem",
                "tls_key": certs / "person-%u.key", "tls_ca": certs / "ca.pem"}
    lines = []
    for line in conf.splitlines():
        key = line.split("=", 1)[0]
        lines.append(f"{key}={settings[key]}" if key in settings else line)
    (scripts / "flopscope-slurm.conf").write_text("\n".join(lines) + "\n")


class SlurmTest(unittest.TestCase):

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("slurmd and the Prolog need root (they start jobs and daemons as the "
                          "job's user); CI runs the suite as root")
        missing = [p for p in PROGRAMS if shutil.which(p) is None]
        if missing:
            self.skipTest(f"not installed: {', '.join(missing)} (Debian packages slurmctld, "
                          "slurmd, slurm-client, munge: scripts/setup_deps.sh test set)")
        self._tmp = tempfile.TemporaryDirectory(prefix="fs-slurm-")
        self.root = Path(self._tmp.name)
        os.chmod(self.root, 0o755)
        self.processes = []
        self.processes_logs = []
        self.aggregator = None
        self.env = dict(os.environ, SLURM_CONF=str(self.root / "slurm.conf"))
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "FLOPSCOPE_SOCKET", "FLOPSCOPE_JOB_ID"):
            self.env.pop(name, None)
        # The job runs as an ordinary user, as on a real cluster: its daemons must run as that
        # user too. Its spool must be its own directory.
        self.user = pwd.getpwnam("nobody")
        spool = self.root / "spool-job"
        spool.mkdir(mode=0o700)
        os.chown(spool, self.user.pw_uid, self.user.pw_gid)
        self.env["FLOPSCOPE_SPOOL_DIR"] = str(spool)

    def tearDown(self):
        subprocess.run(["scancel", "--full", "--partition=test"], env=self.env,
                       capture_output=True, timeout=30)
        if self.aggregator is not None:
            self.aggregator.stop()
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for log in self.processes_logs:
            log.close()
        self._tmp.cleanup()

    def start(self, name, argv):
        log = open(self.root / f"{name}.out", "wb")
        self.processes_logs.append(log)
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.processes.append(process)
        return process

    def logs(self):
        texts = []
        for path in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.out")):
            texts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(texts)

    def start_munge(self):
        munge = self.root / "munge"
        munge.mkdir(mode=0o755)  # the job's user reaches the socket; the key stays root's
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.start("munged", ["munged", "--foreground", "--force", f"--socket={munge}/munge.sock",
                              f"--key-file={key}", f"--pid-file={munge}/munged.pid",
                              f"--log-file={munge}/munged.log", f"--seed-file={munge}/seed"])
        self.wait_for(lambda: (munge / "munge.sock").exists(), "munged's socket")

    def wait_for(self, condition, what, timeout=30):
        deadline = time.monotonic() + timeout
        while not condition():
            for process in self.processes:
                if process.poll() is not None:
                    self.fail(f"{process.args[0]} exited with {process.returncode} while "
                              f"waiting for {what}:\n{self.logs()}")
            if time.monotonic() > deadline:
                self.fail(f"no {what} within {timeout}s:\n{self.logs()}")
            time.sleep(0.2)

    def nodes_idle(self):
        result = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=self.env,
                                capture_output=True, text=True, timeout=10)
        states = dict(line.split() for line in result.stdout.splitlines() if line.strip())
        return all(states.get(node) == "idle" for node in NODES)

    def start_aggregator(self):
        """The cluster's aggregator, mutual TLS on loopback; returns its HOST:PORT."""
        self.certs = self.root / "certs"
        subprocess.run([str(MAKE_TEST_CA), str(self.certs), "--person", self.user.pw_name],
                       check=True, capture_output=True, timeout=60)
        (self.root / "aggregator").mkdir()
        self.aggregator = Daemon(self.root / "aggregator")
        self.aggregator.start(extra_args=["--tcp", "127.0.0.1:0", *self.tls("daemon")])
        found = re.search(r"mutual TLS on (\S+)", self.aggregator.log())
        self.assertIsNotNone(found, self.aggregator.log())
        return found.group(1)

    def tls(self, name):
        return ["--tls-cert", str(self.certs / f"{name}.pem"), "--tls-key",
                str(self.certs / f"{name}.key"), "--tls-ca", str(self.certs / "ca.pem")]

    def start_cluster(self):
        for folder in ("state", "spool", "run", "data"):
            (self.root / folder).mkdir()
        self.upstream = self.start_aggregator()
        install_scripts(self.root, self.upstream, self.certs)
        conf = slurm_conf(self.root, free_ports(3))
        self.start_munge()
        self.start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)])
        for node in NODES:
            self.start(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(conf)])
        self.wait_for(self.nodes_idle, "idle nodes n1 and n2", timeout=45)

    def node_view(self, node, job):
        """The node's `ranks` and `report` of the job's step 0, read back by a daemon of its own
        (the job's daemon is gone)."""
        data = self.root / "data" / node / f"job-{job}"
        daemon = Daemon(self.root / f"read-{node}")
        daemon.root.mkdir()
        daemon.data_dir = data
        daemon.start()
        try:
            return [self.json_of(client([command, f"{job}.0", "--socket", str(daemon.socket),
                                         "--format", "json"])) for command in ("ranks", "report")]
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.log())

    def json_of(self, result):
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def aggregator_view(self, job):
        """The aggregator's `ranks` and `report` of the job's step 0, asked over mutual TLS with
        the job user's certificate."""
        return [self.json_of(client([command, f"{job}.0", "--format", "json", "--server",
                                     self.upstream, *self.tls(f"person-{self.user.pw_name}")]))
                for command in ("ranks", "report")]

    def test_prolog_daemons_forward_four_ranks_on_two_nodes_to_one_aggregator(self):
        self.start_cluster()
        as_user = ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}",
                   "--clear-groups"]
        srun = subprocess.run(
            [*as_user, "srun", "-N2", "-n4", "--ntasks-per-node=2", "--job-name=fs-slurm",
             "-t", "2", tool("flopscope"), "run", "--",
             tool("transformer_nvtx"), "--steps", "2", "--layers", "1"],
            env=self.env, capture_output=True, text=True, timeout=120)
        self.assertEqual(srun.returncode, 0, f"{srun.stderr}\n{self.logs()}")
        jobs = {node: [p.name for p in (self.root / "data" / node).iterdir()] for node in NODES}
        self.assertEqual(len(jobs["n1"]), 1, jobs)
        self.assertEqual(jobs["n1"], jobs["n2"], "one job, a daemon on each node")
        job = jobs["n1"][0].removeprefix("job-")
        for node in NODES:
            data_dir = self.root / "data" / node / f"job-{job}"
            data = data_dir.stat()
            self.assertEqual((data.st_uid, data.st_mode & 0o777), (self.user.pw_uid, 0o700),
                             f"{node}: the job's data is its user's alone")
            # Written by a daemon running as the job's user, not as root.
            rank_files = list(data_dir.glob("jobs/*/rank-*.sqlite"))
            self.assertEqual(len(rank_files), 2, rank_files)
            self.assertEqual({f.stat().st_uid for f in rank_files}, {self.user.pw_uid})
        # The Epilog runs once the job ends: it stops each node's daemon and removes its socket.
        self.wait_for(lambda: not any((self.root / "run" / n / f"job-{job}").exists()
                                      for n in NODES), "the epilog's cleanup")

        expected = {"n1": [0, 1], "n2": [2, 3]}  # srun's default block distribution
        on_nodes, node_calls = {}, []
        for node in NODES:
            listed, node_report = self.node_view(node, job)
            ranks = listed["ranks"]
            on_nodes.update({entry["rank"]: (node, entry) for entry in ranks})
            node_calls.append(calls_by_path(node_report))
            self.assertEqual(sorted(r["rank"] for r in ranks), expected[node], ranks)
            for entry in ranks:
                self.assertEqual(entry["world_size"], 4, entry)
                self.assertGreater(entry["ranges"], 0, entry)
                self.assertEqual(entry["lost"], 0, entry)
                self.assertFalse(entry["connected"], entry)
            log = (self.root / "data" / node / f"job-{job}" / "flopscoped.log").read_text()
            self.assertIn("stopped", log, f"{node}: the epilog's SIGTERM drained the daemon")
            self.assertIn(f"forwarding every committed batch to {self.upstream}", log)
            self.assertIn(f"forwarded every batch to {self.upstream}", log)
        self.assert_one_aggregator_report(job, on_nodes, node_calls)

    def assert_one_aggregator_report(self, job, on_nodes, node_calls):
        """The aggregator's ranks are the nodes' ranks, each with what its node stored."""
        listed, whole = self.aggregator_view(job)
        ranks = listed["ranks"]
        self.assertEqual(sorted(r["rank"] for r in ranks), [0, 1, 2, 3], ranks)
        for entry in ranks:
            node, there = on_nodes[entry["rank"]]
            self.assertEqual(entry["world_size"], 4, entry)
            self.assertEqual(entry["lost"], 0, entry)
            self.assertEqual((entry["pid"], entry["ranges"], entry["sessions"]),
                             (there["pid"], there["ranges"], there["sessions"]),
                             f"rank {entry['rank']}: not what {node} stored")
            node_file = (self.root / "data" / node / f"job-{job}" / "jobs" / f"{job}.0" /
                         f"rank-{entry['rank']:05d}.sqlite")
            self.assertEqual(sessions(self.aggregator.rank_file(f"{job}.0", entry["rank"])),
                             sessions(node_file), f"rank {entry['rank']}: lost or stored twice")
        expected = {path: sum(calls.get(path, 0) for calls in node_calls)
                    for path in set().union(*node_calls)}
        self.assertTrue(expected)
        self.assertEqual(calls_by_path(whole), expected)


if __name__ == "__main__":
    unittest.main()
