"""Shared fixtures for the end-to-end tests: a real flopscoped on a private socket and data dir,
jobs run under `flopscope run`, and reports read back as JSON."""

import json
import os
import pwd
import re
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

BUILD_DIR = Path(os.environ.get("FLOPSCOPE_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
BIN_DIR = BUILD_DIR / "bin"
TEST_BIN_DIR = BUILD_DIR / "tests"
INJECTOR = BUILD_DIR / "lib" / "libflopscope_inject.so"


def tool(name):
    path = BIN_DIR / name
    if not path.exists():
        raise AssertionError(f"{path} is not built")
    return str(path)


def test_program(name):
    path = TEST_BIN_DIR / name
    if not path.exists():
        raise AssertionError(f"{path} is not built")
    return str(path)


class Daemon:
    """flopscoped on a temporary socket and data dir; stop() returns its exit code."""

    def __init__(self, root: Path):
        self.root = root
        self.socket = root / "fs.sock"
        self.data_dir = root / "data"
        self.log_path = root / "flopscoped.log"
        self.process = None
        # Test daemons leave the user's real spool directories alone (the injector's next
        # process delivers the tests' orphans); test_orphan_spools points this at its own.
        self.args = ["--collect-spools"]
        self.prefix = []  # runs `prefix flopscoped ...` (e.g. `ip netns exec NS`), which must exec

    def start(self, timeout=20.0, extra_args=()):
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [*self.prefix, tool("flopscoped"), "--socket", str(self.socket),
             "--data-dir", str(self.data_dir),
             *self.args, *extra_args],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"flopscoped exited with {self.process.returncode}:\n{self.log()}")
            if self.socket.exists() and client(["jobs", "--socket", str(self.socket)]).returncode == 0:
                return self
            time.sleep(0.05)
        raise AssertionError(f"flopscoped did not serve within {timeout}s:\n{self.log()}")

    def stop(self, timeout=20.0):
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"flopscoped ignored SIGTERM for {timeout}s:\n{self.log()}")
        finally:
            self._log.close()

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def rank_file(self, job, rank):
        return self.data_dir / "jobs" / job / f"rank-{rank:05d}.sqlite"


def client(args, timeout=60, **kwargs):
    return subprocess.run([tool("flopscope"), *args], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def run_job(daemon_socket, job, command, env=None, timeout=120, run_args=()):
    """Runs `command` under `flopscope run [run_args]`; returns the CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [tool("flopscope"), "run", "--job", job, "--socket", str(daemon_socket), *run_args, "--",
         *command],
        capture_output=True, text=True, env=full_env, timeout=timeout)


def start_job(daemon_socket, job, command, env=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.Popen(
        [tool("flopscope"), "run", "--job", job, "--socket", str(daemon_socket), "--", *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)


def report(daemon_socket, job, rank=None, steps=None):
    """The JSON report. Its phases cover the report's steps: by default from step 1 (step 0 is
    warm-up); steps="0:" for every step."""
    args = ["report", job, "--socket", str(daemon_socket), "--format", "json"]
    if rank is not None:
        args += ["--rank", str(rank)]
    if steps is not None:
        args += ["--steps", steps]
    result = client(args)
    if result.returncode != 0:
        raise AssertionError(f"report failed ({result.returncode}): {result.stderr}")
    return json.loads(result.stdout)


_TREE_HEAD = re.compile(r"^( *)(?:\((.+?)\): )?([A-Za-z_][A-Za-z0-9_.]*)\(")


def detailed_tree_rows(text):
    """The module lines of the text report's detailed section (DeepSpeed's `print(model)` tree),
    in order: (depth, name, class), name "" for the root ("TinyLM("), "0" for "(0): Block(";
    figure lines and ")" lines left out."""
    section = text[text.index("Detailed Profile per GPU"):]
    rows, tree = [], False
    for line in section.splitlines()[1:]:
        if line.startswith("------"):
            break  # the closing rule
        match = _TREE_HEAD.match(line)
        if not match:
            continue
        indent, name, class_name = match.group(1), match.group(2) or "", match.group(3)
        tree = tree or (not indent and not name)  # the root: the first head with no indent
        if tree:
            rows.append((len(indent) // 2, name, class_name))
    return rows


def calls_by_path(report_json):
    return {m["path"]: m["calls"] for m in report_json["modules"]}


def user_exists(name):
    """Whether the Unix user `name` exists on this machine."""
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def rank_env(rank, world_size, local_rank=None):
    return {"RANK": str(rank), "WORLD_SIZE": str(world_size),
            "LOCAL_RANK": str(rank if local_rank is None else local_rank)}


def mount_tmpfs(test, path: Path, size: str):
    """A tmpfs of `size` ("2m") at `path`, made here, for a DaemonTestCase's small disk:
    unmounted by its tearDown once the daemon stopped, before the test's directory goes; the
    test is skipped where no tmpfs can be mounted (not root)."""
    path.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        test.skipTest(f"cannot mount a tmpfs: {result.stderr.strip()}")
    test.mounts.append(path)
    return path


class DaemonTestCase(unittest.TestCase):
    """Each test gets its own daemon; tearDown checks it shuts down cleanly on SIGTERM."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="flopscope-it-")
        self.root = Path(self._tmp.name)
        self.daemon = Daemon(self.root)
        self.mounts = []  # mount_tmpfs's, unmounted in tearDown
        # Each test's jobs spool (and pick up orphans) in a directory of its own, never the user's.
        self._spool_dir_before = os.environ.get("FLOPSCOPE_SPOOL_DIR")
        os.environ["FLOPSCOPE_SPOOL_DIR"] = str(self.root / "spool")

    def tearDown(self):
        if self._spool_dir_before is None:
            os.environ.pop("FLOPSCOPE_SPOOL_DIR", None)
        else:
            os.environ["FLOPSCOPE_SPOOL_DIR"] = self._spool_dir_before
        try:
            rc = self.daemon.stop()
            if rc is not None:
                self.assertEqual(rc, 0, f"flopscoped exit code on SIGTERM:\n{self.daemon.log()}")
        finally:
            for mount in self.mounts:
                subprocess.run(["umount", "-l", str(mount)], capture_output=True)
            self._tmp.cleanup()
