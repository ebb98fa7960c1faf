"""deploy/systemd: the node daemon's and the aggregator's units say what they must (socket and
data directories, hardening, the aggregator's TLS key through LoadCredential=, the node's
optional arguments from /etc/default/flopscoped), systemd's own `systemd-analyze verify` and
`security --offline` accept them, and their ExecStart runs: every flag is in `flopscoped
--help`, and the build's flopscoped started with exactly those arguments (paths moved into a temp
dir, /etc/flopscope/tls holding a throw-away CA's certificates, %d a credentials directory the
test fills as LoadCredential= would) serves: the aggregator over mutual TLS, the node daemon
standalone and, with the forwarding example of flopscoped.default, forwarding a job to it.

No systemd runs here (a container): systemd-analyze reads the files offline, nothing is started
by systemd. The checks that need systemd-analyze skip with a message where it is absent."""

import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import unittest
from pathlib import Path

from deploy_tls import StartedDaemon, forwarded_ranks, make_test_ca, person_tls, run_tiny_job
from harness import client, tool  # on the path through deploy_tls

UNITS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
UNITS = ["flopscoped.service", "flopscoped-aggregator.service"]
TLS_DIR = "/etc/flopscope/tls"
ENVIRONMENT_FILE = "/etc/default/flopscoped"
# What the units' comments say to install into /etc/flopscope/tls, from make_test_ca.sh's files.
INSTALLED_AS = {"ca.pem": "ca.pem", "aggregator.pem": "daemon.pem", "aggregator.key": "daemon.key",
                "node.pem": "node.pem", "node.key": "node.key"}

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
    "RuntimeDirectoryMode": "0755",
}
# The node daemon keeps one capability and one call of @resources: raising its own CPU priority
# over the jobs it watches (daemon/base/cpu_priority.h); the aggregator none.
CAPABILITIES = {"flopscoped.service": "CAP_SYS_NICE", "flopscoped-aggregator.service": ""}
ALLOWED_CALLS = {"flopscoped.service": ["setpriority"], "flopscoped-aggregator.service": []}


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


def environment_file_values(text):
    """{KEY: value} of an EnvironmentFile's assignments, and the commented-out examples
    (`#KEY=value`) as {KEY: [value, ...]}."""
    values, examples = {}, {}
    for line in text.splitlines():
        assigned = re.fullmatch(r"(#?)([A-Z_][A-Z0-9_]*)=(.*)", line.strip())
        if assigned and assigned.group(1):
            examples.setdefault(assigned.group(2), []).append(assigned.group(3))
        elif assigned:
            values[assigned.group(2)] = assigned.group(3)
    return values, examples


def expand(word, environment, credentials):
    """One ExecStart word as systemd expands it: an unquoted $VAR or ${VAR} alone becomes the
    variable's words (none when unset), %d the credentials directory."""
    variable = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", word)
    if variable:
        return environment.get(variable.group(1), "").split()
    return [word.replace("%d", credentials)]


def exec_arguments(service, environment=None, credentials="%d"):
    argv = [expanded for word in shlex.split(last(service, "ExecStart"))
            for expanded in expand(word, environment or {}, credentials)]
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
            self.assertEqual(last(service, "CapabilityBoundingSet"), CAPABILITIES[name], name)
            self.assertEqual(last(service, "AmbientCapabilities"), CAPABILITIES[name], name)
            filters = [v for k, v in service if k == "SystemCallFilter"]
            self.assertEqual(filters, ["@system-service", "~@privileged @resources"]
                             + ALLOWED_CALLS[name], name)
            # A refused call fails (the daemon says it keeps its priority) instead of killing it.
            self.assertEqual(last(service, "SystemCallErrorNumber"), "EPERM", name)

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

    def test_exec_start_flags_exist(self):
        flags = daemon_flags()
        _, default_file = self.node_environment()
        for name in UNITS:
            _, options = exec_arguments(self.service(name))
            self.assertLessEqual(set(options), flags, f"{name}: flags flopscoped lacks")
        _, forwarding = exec_arguments(self.service("flopscoped.service"), default_file)
        self.assertLessEqual(set(forwarding), flags, "flopscoped.default's example")

    def node_environment(self):
        """The node unit's EnvironmentFile, optional, is deploy's flopscoped.default: (its
        values, its values with the commented forwarding example in force)."""
        service = self.service("flopscoped.service")
        self.assertEqual(last(service, "EnvironmentFile"), f"-{ENVIRONMENT_FILE}")
        self.assertIn("$FLOPSCOPED_ARGS", last(service, "ExecStart"))
        values, examples = environment_file_values((UNITS_DIR / "flopscoped.default").read_text())
        self.assertEqual(values, {"FLOPSCOPED_ARGS": ""}, "standalone unless the operator says")
        self.assertEqual(len(examples["FLOPSCOPED_ARGS"]), 1)
        return values, {"FLOPSCOPED_ARGS": examples["FLOPSCOPED_ARGS"][0]}

    def test_aggregator_serves_mutual_tls_with_its_key_as_a_credential(self):
        service = self.service("flopscoped-aggregator.service")
        unit = parse_unit(UNITS_DIR / "flopscoped-aggregator.service")["Unit"]
        self.assertIn("network-online.target", last(unit, "After").split())
        self.assertEqual(last(unit, "Wants"), "network-online.target")
        credential, source = last(service, "LoadCredential").split(":", 1)
        _, options = exec_arguments(service)
        self.assertEqual(options["--tls-key"], f"%d/{credential}")
        self.assertEqual(source, f"{TLS_DIR}/{credential}")
        for flag in ("--tls-cert", "--tls-ca"):
            self.assertIn(Path(options[flag]).name, INSTALLED_AS, flag)
            self.assertEqual(str(Path(options[flag]).parent), TLS_DIR, flag)
        self.assertRegex(options["--tcp"], r"^0\.0\.0\.0:[0-9]+$", "every interface")

    def test_exec_start_runs_the_aggregator_and_a_node_forwarding_to_it(self):
        default, forwarding = self.node_environment()
        with tempfile.TemporaryDirectory(prefix="flopscope-unit-") as tmp:
            root = Path(tmp)
            certs = make_test_ca(root / "certs")
            tls = root / "etc-tls"
            tls.mkdir()
            for installed, made in INSTALLED_AS.items():
                shutil.copy(certs / made, tls / installed)
            aggregator_name = "flopscoped-aggregator.service"
            aggregator = self.start_unit(aggregator_name, root / "aggregator", tls)
            try:
                server = aggregator.tls_address()
                listing = client(["jobs", "--server", server, *person_tls(certs)])
                self.assertEqual(listing.returncode, 0, listing.stderr)
                self.assertNotEqual(client(["jobs", "--server", server]).returncode, 0,
                                    "no client certificate, no answer")
                node = self.start_unit("flopscoped.service", root / "standalone", tls, default)
                self.assertEqual(node.stop(), 0, node.log())
                # The forwarding example, its aggregator's host:port swapped for the one here.
                _, port = exec_arguments(self.service(aggregator_name))[1]["--tcp"].split(":")
                example = forwarding["FLOPSCOPED_ARGS"].split()
                upstream = example.index("--upstream") + 1
                self.assertEqual(example[upstream].rsplit(":", 1)[1], port, "the aggregator's")
                example[upstream] = server
                node = self.start_unit("flopscoped.service", root / "node", tls,
                                       {"FLOPSCOPED_ARGS": " ".join(example)})
                try:
                    run_tiny_job(node.socket, "unit-job", root / "spool")
                    self.assertEqual(forwarded_ranks(server, certs, "unit-job"), [0],
                                     node.log() + aggregator.log())
                finally:
                    self.assertEqual(node.stop(), 0, node.log())
            finally:
                self.assertEqual(aggregator.stop(), 0, aggregator.log())

    def start_unit(self, name, root, tls, environment=None):
        """The unit's ExecStart with the build's flopscoped: its directories under `root`, its
        TLS files in `tls`, LoadCredential= copied into a credentials directory, --tcp on a free
        loopback port. Orphaned spools are not collected (not the test's to take)."""
        service = self.service(name)
        credentials = root / "credentials"
        credentials.mkdir(parents=True, mode=0o700)
        for entry in (v for k, v in service if k == "LoadCredential"):
            credential, source = entry.split(":", 1)
            shutil.copy(source.replace(TLS_DIR, str(tls)), credentials / credential)
        _, options = exec_arguments(service, environment, str(credentials))
        options["--socket"] = str(root / "run" / "flopscope.sock")
        options["--data-dir"] = str(root / "data")
        if "--tcp" in options:
            options["--tcp"] = "127.0.0.1:0"
        os.mkdir(root / "run", 0o755)
        argv = [tool("flopscoped"), "--collect-spools"]
        for flag, value in options.items():
            argv += [flag] if value is None else [flag, value.replace(TLS_DIR, str(tls))]
        daemon = StartedDaemon(argv, options["--socket"], root / "flopscoped.log")
        self.assertTrue(stat.S_ISSOCK(os.stat(options["--socket"]).st_mode), name)
        return daemon

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
