"""deploy/systemd: the node daemon's and the aggregator's units say what they must (socket and
data directories, hardening), systemd's own `systemd-analyze verify` and `security --offline`
accept them, and their ExecStart runs: every flag is in `flopscoped --help`, and the build's
flopscoped started with exactly those arguments (paths moved into a temp dir) serves.

No systemd runs here (a container): systemd-analyze reads the files offline, nothing is started
by systemd. The checks that need systemd-analyze skip with a message where it is absent."""

import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from harness import client, tool  # noqa: E402

UNITS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
UNITS = ["flopscoped.service", "flopscoped-aggregator.service"]

# What every unit must hold: option -> expected value (the whole value, as systemd reads it).
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "RestrictNamespaces": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "CapabilityBoundingSet": "",
    "RuntimeDirectoryMode": "0755",
}


def parse_unit(path):
    """{section: [(key, value), ...]}, keys repeated as systemd allows; comments dropped."""
    sections, current = {}, None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        if current is None or "=" not in line:
            raise AssertionError(f"{path.name}: not a unit line: {raw!r}")
        key, value = line.split("=", 1)
        current.append((key.strip(), value.strip()))
    return sections


def last(section, key):
    values = [v for k, v in section if k == key]
    return values[-1] if values else None


def daemon_flags():
    """Every --flag `flopscoped --help` lists."""
    text = subprocess.run([tool("flopscoped"), "--help"], capture_output=True, text=True,
                          check=True).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def exec_arguments(service):
    argv = shlex.split(last(service, "ExecStart"))
    options, i = {}, 1
    while i < len(argv):
        flag = argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            options[flag] = argv[i + 1]
            i += 2
        else:
            options[flag] = None
            i += 1
    return argv[0], options


class SystemdUnitsTest(unittest.TestCase):

    def service(self, name):
        sections = parse_unit(UNITS_DIR / name)
        self.assertIn("Service", sections, name)
        self.assertEqual(last(sections.get("Install", []), "WantedBy"), "multi-user.target", name)
        return sections["Service"]

    def test_hardening_options(self):
        for name in UNITS:
            service = self.service(name)
            for key, value in HARDENING.items():
                self.assertEqual(last(service, key), value, f"{name}: {key}")
            self.assertNotIn(last(service, "User"), (None, "root"), name)
            self.assertEqual(last(service, "SystemCallFilter"), "~@privileged @resources", name)

    def test_directories_match_exec_start_and_are_writable(self):
        for name in UNITS:
            service = self.service(name)
            binary, options = exec_arguments(service)
            self.assertEqual(Path(binary).name, "flopscoped", name)
            runtime, state = last(service, "RuntimeDirectory"), last(service, "StateDirectory")
            # The socket lies in the unit's RuntimeDirectory, the data in its StateDirectory,
            # and ProtectSystem=strict leaves exactly those two writable.
            self.assertEqual(str(Path(options["--socket"]).parent), f"/run/{runtime}", name)
            self.assertEqual(options["--data-dir"], f"/var/lib/{state}", name)
            self.assertEqual(set(last(service, "ReadWritePaths").split()),
                             {f"/run/{runtime}", f"/var/lib/{state}"}, name)
        # The node daemon serves the path injector and client use by default.
        _, node = exec_arguments(self.service("flopscoped.service"))
        self.assertEqual(node["--socket"], "/run/flopscope/flopscope.sock")
        _, aggregator = exec_arguments(self.service("flopscoped-aggregator.service"))
        self.assertNotEqual(aggregator["--data-dir"], node["--data-dir"])

    def test_sysusers_declares_the_units_user(self):
        line = (UNITS_DIR / "flopscope.sysusers.conf").read_text().splitlines()
        users = [entry.split()[1] for entry in line if entry.startswith("u ")]
        for name in UNITS:
            service = self.service(name)
            self.assertIn(last(service, "User"), users, name)
            self.assertEqual(last(service, "Group"), last(service, "User"), name)

    def test_exec_start_flags_exist_and_the_daemon_serves_with_them(self):
        flags = daemon_flags()
        for name in UNITS:
            _, options = exec_arguments(self.service(name))
            self.assertLessEqual(set(options), flags, f"{name}: flags flopscoped lacks")
            with tempfile.TemporaryDirectory(prefix="flopscope-unit-") as tmp:
                moved = dict(options)
                moved["--socket"] = f"{tmp}/run/flopscope.sock"
                moved["--data-dir"] = f"{tmp}/data"
                os.mkdir(f"{tmp}/run", 0o755)
                self.assert_serves(name, moved, Path(moved["--socket"]))

    def assert_serves(self, name, options, socket):
        argv = [tool("flopscoped")]
        for flag, value in options.items():
            argv += [flag] if value is None else [flag, value]
        log_path = socket.parent.parent / "flopscoped.log"
        with open(log_path, "wb") as log:
            daemon = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            served = False
            while not served and time.monotonic() < deadline and daemon.poll() is None:
                served = (socket.exists() and
                          client(["jobs", "--socket", str(socket)]).returncode == 0)
                time.sleep(0 if served else 0.05)
            self.assertTrue(served, f"{name}: {log_path.read_text(errors='replace')}")
            self.assertTrue(stat.S_ISSOCK(socket.stat().st_mode), name)
        finally:
            daemon.send_signal(signal.SIGTERM)
            self.assertEqual(daemon.wait(30), 0, name)

    def units_for_analyze(self, tmp):
        """The units with ExecStart pointing at the build's flopscoped (verify checks the path)."""
        paths = []
        for name in UNITS:
            text = (UNITS_DIR / name).read_text().replace("/usr/local/bin/flopscoped",
                                                          tool("flopscoped"))
            path = Path(tmp) / name
            path.write_text(text)
            paths.append(path)
        return paths

    def analyze(self):
        path = shutil.which("systemd-analyze")
        if path is None:
            self.skipTest("systemd-analyze is not installed (Debian package systemd)")
        return path

    def test_systemd_analyze_verify_is_silent(self):
        analyze = self.analyze()
        with tempfile.TemporaryDirectory(prefix="flopscope-unit-") as tmp:
            for unit in self.units_for_analyze(tmp):
                result = subprocess.run([analyze, "verify", str(unit)], capture_output=True,
                                        text=True, timeout=60)
                # Unknown keys and bad values are warnings with exit code 0: any output fails.
                self.assertEqual((result.returncode, result.stdout + result.stderr), (0, ""),
                                 unit.name)

    def test_systemd_analyze_security_rates_them_ok(self):
        analyze = self.analyze()
        with tempfile.TemporaryDirectory(prefix="flopscope-unit-") as tmp:
            for unit in self.units_for_analyze(tmp):
                result = subprocess.run([analyze, "security", "--offline=yes", str(unit)],
                                        capture_output=True, text=True, timeout=60)
                match = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)",
                                  result.stdout + result.stderr)
                self.assertIsNotNone(match, result.stdout + result.stderr)
                # systemd's own scale: OK below 2.0 of 10 (MEDIUM, EXPOSED, UNSAFE above).
                self.assertEqual(match.group(2), "OK", match.group(0))


if __name__ == "__main__":
    unittest.main()
