"""What the deploy tests share to run deploy/'s mutual-TLS command lines against the build: a
throw-away CA and certificates from deploy/tls/make_test_ca.sh, a daemon started from a deployed
command line (paths moved into a temp dir by the caller) until it serves, the address its TLS
port took, the client over mutual TLS, and a tiny job run on a node daemon and waited for on the
aggregator it forwards to."""

import getpass
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from harness import client, rank_env, run_job, test_program  # noqa: E402

MAKE_TEST_CA = Path(__file__).resolve().parents[2] / "deploy" / "tls" / "make_test_ca.sh"
PERSON = getpass.getuser()


def make_test_ca(directory):
    """A test CA in `directory`: ca.pem, daemon.*, node.*, person-<this user>.* (make_test_ca.sh
    names them); returns the directory."""
    subprocess.run([str(MAKE_TEST_CA), str(directory), "--person", PERSON], check=True,
                   capture_output=True, timeout=60)
    return Path(directory)


def person_tls(certs):
    """The client's --tls-* flags with this user's person certificate."""
    return ["--tls-cert", str(certs / f"person-{PERSON}.pem"),
            "--tls-key", str(certs / f"person-{PERSON}.key"), "--tls-ca", str(certs / "ca.pem")]


class StartedDaemon:
    """flopscoped started with `argv` (the build's binary first), its output in `log_path`."""

    def __init__(self, argv, socket, log_path, timeout=20.0):
        self.socket, self.log_path = Path(socket), Path(log_path)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while client(["jobs", "--socket", str(self.socket)]).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{argv} did not serve:\n{self.log()}")
            time.sleep(0.05)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def tls_address(self):
        """HOST:PORT of the mutual-TLS port (the daemon logs the port --tcp HOST:0 took)."""
        found = re.search(r"mutual TLS on (\S+)", self.log())
        if found is None:
            raise AssertionError(f"no mutual TLS port:\n{self.log()}")
        return found.group(1)

    def stop(self):
        """SIGTERM; the exit code (0 when it drained and checkpointed)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)


def run_tiny_job(node_socket, job, spool_dir):
    """One rank of a short NVTX program under the injector, recorded by the node daemon."""
    env = {**rank_env(0, 1), "FLOPSCOPE_SPOOL_DIR": str(spool_dir)}
    result = run_job(node_socket, job, [test_program("nvtx_phases"), "--before", "20"], env=env)
    if result.returncode != 0:
        raise AssertionError(f"job {job}: {result.stderr}")


def forwarded_ranks(server, certs, job, timeout=30.0):
    """The ranks of `job` the aggregator at `server` lists over mutual TLS (this user's person
    certificate), once it lists any; [] when none arrived within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = client(["ranks", job, "--format", "json", "--server", server,
                         *person_tls(certs)])
        if result.returncode == 0:
            ranks = [r["rank"] for r in json.loads(result.stdout)["ranks"]]
            if ranks:
                return ranks
        time.sleep(0.1)
    return []
