"""The Kubernetes pod, simulated with `unshare`: the daemon and each training "pod" run in mount,
network, PID and UTS namespaces of their own and share nothing but the socket directory, bound
at /run/flopscope in each, as deploy/kubernetes mounts it (hostPath or emptyDir). The jobs reach
the daemon through that directory alone, and the report shows each pod's own hostname and PID.

A mock-free simulation of what the manifests set up, not a cluster: what Kubernetes adds (the
kubelet, images, probes) is checked by tests/deploy/test_kubernetes_manifests.py. Needs root (or
CAP_SYS_ADMIN) for unshare; skips with the reason only where the kernel refuses namespaces."""

import json
import os
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import grpc

from harness import client, tool

HEALTH_CHECK = "/grpc.health.v1.Health/Check"
SERVING = b"\x08\x01"  # HealthCheckResponse{status: SERVING}: field 1, varint 1

# Runs inside fresh namespaces: a private /run with only the shared socket directory bound at
# /run/flopscope, the other side's directory hidden under a tmpfs, a hostname of its own, the
# namespace ids written down, then the command. unshare's default propagation is private, so
# none of these mounts reach the host.
POD_SETUP = r"""
set -eu
mount -t tmpfs -o mode=0755 pod-run /run
mkdir /run/flopscope
mount --bind "$SHARED_DIR" /run/flopscope
mount -t tmpfs -o mode=0700 hidden "$HIDE_DIR"
hostname "$POD_NAME"
readlink /proc/self/ns/mnt /proc/self/ns/net /proc/self/ns/pid /proc/self/ns/uts > "$OWN_DIR/ns"
cat /proc/[0-9]*/comm > "$OWN_DIR/visible-processes" 2>/dev/null || true
ls -A "$HIDE_DIR" > "$OWN_DIR/visible-other-dir"
cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' > "$OWN_DIR/net-devices"
exec "$@"
"""

UNSHARE = ["unshare", "--mount", "--net", "--pid", "--uts", "--fork", "--mount-proc",
           "--kill-child"]


def unshare_refusal():
    """None when this process may create the namespaces, else unshare's complaint."""
    try:
        result = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=20)
    except FileNotFoundError:
        return "unshare (util-linux) is not installed"
    return None if result.returncode == 0 else result.stderr.strip() or f"rc {result.returncode}"


def host_ns_ids():
    return [os.readlink(f"/proc/self/ns/{kind}") for kind in ("mnt", "net", "pid", "uts")]


def health(socket):
    """grpc.health.v1 Check for the whole server (raw bytes: Debian has no grpc_health module)."""
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        check = channel.unary_unary(HEALTH_CHECK)
        return check(b"", timeout=10)


class PodNamespacesTest(unittest.TestCase):

    def setUp(self):
        refusal = unshare_refusal()
        if refusal is not None:
            self.skipTest(f"cannot create mount/net/pid/uts namespaces here: {refusal}")
        self._tmp = tempfile.TemporaryDirectory(prefix="flopscope-pod-")
        self.root = Path(self._tmp.name)
        self.shared = self.root / "run-flopscope"  # the only directory both sides see
        self.daemon_dir = self.root / "daemon"
        self.pods_dir = self.root / "pods"
        for path in (self.shared, self.daemon_dir, self.pods_dir):
            path.mkdir(mode=0o755)
        self.daemon = None

    def tearDown(self):
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.kill()  # --kill-child takes the daemon along
            self.daemon.wait()
        self._tmp.cleanup()

    def in_pod(self, name, own_dir, hide_dir, command, env=None, **popen):
        full_env = dict(os.environ, SHARED_DIR=str(self.shared), HIDE_DIR=str(hide_dir),
                        OWN_DIR=str(own_dir), POD_NAME=name, **(env or {}))
        return subprocess.Popen([*UNSHARE, "sh", "-c", POD_SETUP, name, *command], env=full_env,
                                **popen)

    def start_daemon(self):
        self.daemon_log = open(self.daemon_dir / "flopscoped.log", "wb")
        self.addCleanup(self.daemon_log.close)
        self.daemon = self.in_pod(
            "node-daemon", self.daemon_dir, self.pods_dir,
            [tool("flopscoped"), "--data-dir", str(self.daemon_dir / "data"),
             "--socket", "/run/flopscope/flopscope.sock"],
            stdout=self.daemon_log, stderr=subprocess.STDOUT)
        socket = self.shared / "flopscope.sock"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            self.assertIsNone(self.daemon.poll(), self.log())
            if socket.exists() and client(["jobs", "--socket", str(socket)]).returncode == 0:
                return socket
            time.sleep(0.05)
        self.fail(f"the daemon in its namespaces did not serve within 20 s:\n{self.log()}")

    def log(self):
        return (self.daemon_dir / "flopscoped.log").read_text(errors="replace")

    def stop_daemon(self):
        """SIGTERM to the daemon itself (PID 1 of its namespace); unshare returns its status."""
        children = Path(f"/proc/{self.daemon.pid}/task/{self.daemon.pid}/children").read_text()
        os.kill(int(children.split()[0]), signal.SIGTERM)
        self.assertEqual(self.daemon.wait(timeout=30), 0, self.log())

    def run_pods(self, job, world_size):
        pods = []
        for rank in range(world_size):
            own = self.pods_dir / f"rank-{rank}"
            own.mkdir()
            env = {"FLOPSCOPE_SOCKET": "/run/flopscope/flopscope.sock", "FLOPSCOPE_JOB_ID": job,
                   "RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": "0",
                   "FLOPSCOPE_SPOOL_DIR": str(own / "spool")}
            command = [tool("flopscope"), "run", "--",
                       tool("transformer_nvtx"), "--steps", "2", "--layers", "1"]
            pods.append((own, self.in_pod(f"train-pod-{rank}", own, self.daemon_dir, command,
                                          env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)))
        for own, pod in pods:
            out, err = pod.communicate(timeout=120)
            self.assertEqual(pod.returncode, 0, f"{own.name}: {err}")
        return [own for own, _ in pods]

    def test_job_in_its_own_namespaces_reaches_the_daemon_through_the_socket_dir_only(self):
        socket = self.start_daemon()
        self.assertEqual(health(socket), SERVING)
        pods = self.run_pods("pod-job", 2)

        daemon_ns = (self.daemon_dir / "ns").read_text().split()
        self.assertEqual(len(set(daemon_ns) & set(host_ns_ids())), 0, daemon_ns)
        for own in pods:
            pod_ns = (own / "ns").read_text().split()
            # Every namespace differs from the daemon's and from the host's.
            self.assertEqual(len(set(pod_ns) & (set(daemon_ns) | set(host_ns_ids()))), 0, pod_ns)
            # Inside the pod: no daemon process, none of its files, no network but loopback.
            self.assertNotIn("flopscoped", (own / "visible-processes").read_text().split())
            self.assertEqual((own / "visible-other-dir").read_text(), "")
            self.assertEqual((own / "net-devices").read_text().split(), ["lo"])

        ranks = json.loads(client(["ranks", "pod-job", "--socket", str(socket), "--format",
                                   "json"]).stdout)["ranks"]
        self.assertEqual(sorted(r["rank"] for r in ranks), [0, 1])
        for entry in ranks:
            # The report shows each pod as its namespaces made it: its own hostname, and the PID
            # the program had inside its PID namespace (PID 1 there, where sh execs the job).
            self.assertEqual(entry["host"], f"train-pod-{entry['rank']}")
            self.assertLess(entry["pid"], 10, entry)
            self.assertEqual(entry["world_size"], 2)
            self.assertGreater(entry["ranges"], 0, entry)
            self.assertEqual(entry["lost"], 0, entry)
        # The rank files are in the daemon's data dir, which the pods never saw.
        self.assertTrue((self.daemon_dir / "data" / "jobs" / "pod-job").is_dir())
        self.stop_daemon()


if __name__ == "__main__":
    unittest.main()
