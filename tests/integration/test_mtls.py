"""Mutual TLS on flopscoped's TCP port (docs/architecture.md, "Access model"): certificates from
deploy/tls/make_test_ca.sh, a daemon on 127.0.0.1 with --tcp and --tls-*, a job recorded over the
unix socket, then the client over TLS: the owner's person certificate reads it (the same report
as over the socket), another user's certificate is denied, a node daemon's certificate may only
forward (it reads, prunes, profiles and writes nothing itself), and a certificate of another CA, no
certificate and plain TCP are refused at the handshake."""

import getpass
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import grpc

from harness import (DaemonTestCase, calls_by_path, client, rank_env, report, run_job,
                     test_program, tool, user_exists)

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "tls" / "make_test_ca.sh"
JOB = "tls-job"


class MutualTlsTest(DaemonTestCase):

    def setUp(self):
        super().setUp()
        if shutil.which("openssl") is None:
            self.fail("openssl is not installed (scripts/setup_deps.sh test installs it)")
        self.me = getpass.getuser()
        self.other = "nobody" if self.me != "nobody" else "root"
        self.certs = self.root / "certs"
        subprocess.run([str(SCRIPT), str(self.certs), "--person", self.me, "--person", self.other],
                       check=True, capture_output=True, timeout=60)
        self.daemon.start(extra_args=["--tcp", "127.0.0.1:0", *self.daemon_tls("daemon")])
        found = re.search(r"mutual TLS on (\S+)", self.daemon.log())
        self.assertIsNotNone(found, self.daemon.log())
        self.server = found.group(1)
        result = run_job(self.daemon.socket, JOB, [test_program("nvtx_phases"), "--before", "20"],
                         env=rank_env(0, 1))
        self.assertEqual(result.returncode, 0, result.stderr)

    def daemon_tls(self, name, key=None):
        return ["--tls-cert", str(self.certs / f"{name}.pem"),
                "--tls-key", str(self.certs / f"{key or name}.key"),
                "--tls-ca", str(self.certs / "ca.pem")]

    def over_tls(self, args, cert):
        """`flopscope ARGS --server ...` with `cert`'s certificate and key and the test CA."""
        return client([*args, "--server", self.server,
                       "--tls-cert", str(self.certs / f"{cert}.pem"),
                       "--tls-key", str(self.certs / f"{cert}.key"),
                       "--tls-ca", str(self.certs / "ca.pem")])

    def test_owner_and_node_read_others_are_refused(self):
        mine = f"person-{self.me}"
        listing = self.over_tls(["jobs", "--format", "json"], mine)
        self.assertEqual(listing.returncode, 0, listing.stderr)
        self.assertIn(JOB, [job["job"] for job in json.loads(listing.stdout)["jobs"]])

        # The same report over TLS as over the socket.
        by_socket = calls_by_path(report(self.daemon.socket, JOB))
        self.assertTrue(by_socket)
        result = self.over_tls(["report", JOB, "--format", "json"], mine)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(calls_by_path(json.loads(result.stdout)), by_socket)

        # Another local user's certificate: that user's access, so not the owner's job.
        if user_exists(self.other):
            result = self.over_tls(["report", JOB], f"person-{self.other}")
            self.assertNotEqual(result.returncode, 0)
            self.assertIn(f"may not read job {JOB}", result.stderr)
            listing = self.over_tls(["jobs", "--format", "json"], f"person-{self.other}")
            self.assertEqual(listing.returncode, 0, listing.stderr)
            self.assertNotIn(JOB, listing.stdout)

        # A certificate signed by another CA fails the handshake, with the client saying what
        # to check.
        result = self.over_tls(["report", JOB], "other-person")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("over mutual TLS", result.stderr)
        self.assertIn("--tls-ca", result.stderr)

    def test_a_node_certificate_only_forwards(self):
        # Reliability campaign row 4f: the node key sits on every compute node; a person holding
        # it pruned any user's job and opened counter windows in running ranks.
        for args in (["jobs", "--format", "json"], ["report", JOB], ["ranks", JOB],
                     ["prune", JOB], ["profile", JOB, "--count", "1"]):
            result = self.over_tls(args, "node")
            if args[0] == "jobs":
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(json.loads(result.stdout)["jobs"], [], "a node lists no job")
                continue
            self.assertNotEqual(result.returncode, 0, f"{args}: {result.stdout}")
            self.assertIn("may not", result.stderr, args)
        self.assertTrue(calls_by_path(report(self.daemon.socket, JOB)), "the job is still there")
        # Its writes: only forwarded streams, each naming the job's owner on the node.
        trace = self.root / "n.json"
        trace.write_text(json.dumps({"traceEvents": []}))
        result = self.over_tls(["import", str(trace), "--job", "node-job", "--no-progress"], "node")
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn("writes only the sessions it forwards", result.stderr + self.daemon.log())
        # The log names who tried, by certificate.
        self.assertIn("node certificate", self.daemon.log())

    def test_import_over_tls_writes_as_the_certificate_user(self):
        if not user_exists(self.other):
            self.skipTest(f"no user {self.other} on this host")
        trace = self.root / "tiny.json"
        trace.write_text(json.dumps({"traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "layer", "ts": 1, "dur": 10,
             "pid": 1, "tid": 1},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "dur": 1,
             "pid": 1, "tid": 1, "args": {"correlation": 5}},
            {"ph": "X", "cat": "kernel", "name": "k", "ts": 4, "dur": 3, "pid": 0, "tid": 7,
             "args": {"correlation": 5, "device": 0, "stream": 7}}]}))
        other = f"person-{self.other}"
        result = self.over_tls(["import", str(trace), "--job", "their-job", "--no-progress"], other)
        self.assertEqual(result.returncode, 0, result.stderr)
        # The job is theirs: their certificate lists it and not the socket owner's job.
        listing = self.over_tls(["jobs", "--format", "json"], other)
        self.assertEqual(listing.returncode, 0, listing.stderr)
        self.assertEqual([job["job"] for job in json.loads(listing.stdout)["jobs"]], ["their-job"])

    def test_the_variables_do_what_the_flags_do(self):
        env = {"FLOPSCOPE_SERVER": self.server,
               "FLOPSCOPE_TLS_CERT": str(self.certs / f"person-{self.me}.pem"),
               "FLOPSCOPE_TLS_KEY": str(self.certs / f"person-{self.me}.key"),
               "FLOPSCOPE_TLS_CA": str(self.certs / "ca.pem")}
        result = client(["ranks", JOB, "--format", "json"], env={**self.base_env(), **env})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual([r["rank"] for r in json.loads(result.stdout)["ranks"]], [0])

    @staticmethod
    def base_env():
        return {k: v for k, v in os.environ.items() if not k.startswith("FLOPSCOPE_TLS_")}

    def test_no_certificate_and_plain_tcp_are_refused(self):
        # The client never sends a --server request without a certificate...
        result = client(["jobs", "--server", self.server])
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("only over mutual TLS", result.stderr)
        # ... and the daemon refuses a TLS client without one, and plain TCP.
        ca = (self.certs / "ca.pem").read_bytes()
        for name, credentials in (("TLS without a certificate", grpc.ssl_channel_credentials(ca)),
                                  ("plain TCP", None)):
            channel = (grpc.secure_channel(self.server, credentials) if credentials
                       else grpc.insecure_channel(self.server))
            ready = grpc.channel_ready_future(channel)
            with self.assertRaises(grpc.FutureTimeoutError, msg=name):
                ready.result(timeout=2)
            channel.close()
        result = client(["jobs", "--socket", f"ipv4:{self.server}"])
        self.assertNotEqual(result.returncode, 0)

    def test_daemon_checks_its_files_at_start(self):
        started = time.monotonic()
        result = subprocess.run(
            [tool("flopscoped"), "--socket", str(self.root / "second.sock"), "--data-dir",
             str(self.root / "second"), "--collect-spools", "--tcp", "127.0.0.1:0",
             *self.daemon_tls("daemon", key="node")],
            capture_output=True, text=True, timeout=30)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("is not the key of --tls-cert", result.stdout + result.stderr)
        self.assertLess(time.monotonic() - started, 20)
