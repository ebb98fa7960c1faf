"""Runs an unpacked bundle where the distribution's shared libraries cannot be found.

Started by test_dist_bundle.py as `unshare -m --propagation private python3 isolated_run.py SPEC`
(a private mount namespace: nothing here is seen outside it). It

  1. keeps a view of the real library directory, then mounts an empty tmpfs over it, over
     /usr/local/lib and over /etc/ld.so.cache's directory entry (an empty cache), so the loader
     finds nothing of Debian's but the C/C++ runtime files, which are bind-mounted back one by
     one (glibc's libraries, libstdc++, libgcc_s) together with what the test program itself
     needs that is not flopscope's;
  2. checks that the build tree's own client (SPEC's "control", linked against Debian's
     libraries) cannot start any more; starts the bundle's flopscoped, asks the bundle's client
     for `jobs`, runs the test program under `flopscope run` (the bundle's injector and
     transport), then `jobs` and `report`;
  3. writes what happened to SPEC's "result" file as JSON, with LD_DEBUG=libs traces of every
     process in SPEC's "trace_dir" and the daemon's /proc/PID/maps while it served.

Everything Python needs is imported before the libraries disappear: an extension module loaded
afterwards could not find its own dependencies. Exit 0 when the scenario ran (the result says how
it went), 77 when the mounts are refused (the reason is in the result), 1 on a bad spec."""

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
SKIP = 77


class Mounter:
    """mount(2) through libc: the mount(8) program could not start once its libraries are gone."""

    def __init__(self):
        self._libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self._libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]

    def mount(self, source, target, fstype, flags, data=None):
        encoded = [None if v is None else v.encode() for v in (source, target, fstype, data)]
        if self._libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")

    def bind(self, source, target):
        self.mount(source, target, None, MS_BIND)

    def make_everything_private(self):
        self.mount(None, "/", None, MS_REC | MS_PRIVATE)


def bind_file_back(mounter, keep, lib_dir, soname):
    """Makes `lib_dir/soname` (and the file it points to) visible again from the kept view."""
    real = os.path.realpath(os.path.join(keep, soname))
    if not os.path.exists(real):
        return None
    name = os.path.basename(real)
    target = os.path.join(lib_dir, name)
    if not os.path.exists(target):
        open(target, "w").close()
        mounter.bind(real, target)
    if name != soname and not os.path.lexists(os.path.join(lib_dir, soname)):
        os.symlink(name, os.path.join(lib_dir, soname))
    return os.path.join(lib_dir, soname)


def hide_libraries(spec):
    """Step 1. Returns the library files left visible (their paths as the loader sees them)."""
    # Never in the caller's namespace: a tmpfs over the library directory there would break
    # every program on the machine.
    if os.readlink("/proc/self/ns/mnt") == spec["outer_mount_namespace"]:
        raise OSError(0, "not in a mount namespace of its own (run it under unshare -m)")
    mounter = Mounter()
    mounter.make_everything_private()
    lib_dir = os.path.realpath("/lib/x86_64-linux-gnu")
    keep = os.path.join(spec["work_dir"], "kept-libs")
    os.makedirs(keep, exist_ok=True)
    mounter.bind(lib_dir, keep)
    mounter.mount("tmpfs", lib_dir, "tmpfs", 0, "mode=755")
    if os.path.isdir("/usr/local/lib"):
        mounter.mount("tmpfs", "/usr/local/lib", "tmpfs", 0, "mode=755")
    if os.path.exists("/etc/ld.so.cache"):
        empty = os.path.join(spec["work_dir"], "empty-ld.so.cache")
        open(empty, "w").close()
        mounter.bind(empty, "/etc/ld.so.cache")
    visible = []
    for soname in spec["runtime_sonames"] + spec["app_sonames"]:
        path = bind_file_back(mounter, keep, lib_dir, soname)
        if path is not None:
            visible.append(path)
    return visible


def traced_env(spec, name):
    return {"PATH": "/usr/bin:/bin", "LD_DEBUG": "libs",
            "LD_DEBUG_OUTPUT": os.path.join(spec["trace_dir"], name)}


def run(spec, name, args, timeout=60):
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                            env=traced_env(spec, name))
    return {"args": args, "returncode": result.returncode, "stdout": result.stdout,
            "stderr": result.stderr}


def wait_for_daemon(spec, daemon, socket, client):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            return None
        if os.path.exists(socket):
            answer = run(spec, "client-wait", [client, "jobs", "--socket", socket])
            if answer["returncode"] == 0:
                return answer
        time.sleep(0.05)
    return None


def scenario(spec):
    """Step 2: the daemon, the client and an injected job, all from the unpacked bundle."""
    bundle, work = spec["bundle"], spec["work_dir"]
    socket, data_dir = os.path.join(work, "fs.sock"), os.path.join(work, "data")
    daemon_bin = os.path.join(bundle, "bin", "flopscoped")
    client = os.path.join(bundle, "bin", "flopscope")
    out = {"steps": {}}
    # The control: the build tree's client, linked against Debian's libraries, must not start.
    out["control"] = run(spec, "control", [spec["control"], "--version"])
    with open(os.path.join(work, "flopscoped.log"), "wb") as log:
        daemon = subprocess.Popen([daemon_bin, "--socket", socket, "--data-dir", data_dir],
                                  stdout=log, stderr=subprocess.STDOUT,
                                  env=traced_env(spec, "daemon"))
        try:
            out["steps"]["first_jobs"] = wait_for_daemon(spec, daemon, socket, client)
            if out["steps"]["first_jobs"] is not None:
                with open(f"/proc/{daemon.pid}/maps") as maps:
                    out["daemon_maps"] = sorted({line.split()[-1] for line in maps
                                                 if len(line.split()) >= 6 and "/" in line})
                job = [client, "run", "--job", spec["job"], "--socket", socket, "--",
                       *spec["app"]]
                out["steps"]["job"] = run(spec, "job", job, timeout=120)
                out["steps"]["jobs"] = run(spec, "client-jobs",
                                           [client, "jobs", "--socket", socket, "--format", "json"])
                out["steps"]["report"] = run(spec, "client-report",
                                             [client, "report", spec["job"], "--socket", socket,
                                              "--format", "json"])
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                out["daemon_exit"] = daemon.wait(20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                out["daemon_exit"] = "killed after 20 s"
    with open(os.path.join(work, "flopscoped.log"), errors="replace") as log:
        out["daemon_log"] = log.read()
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: isolated_run.py SPEC.json", file=sys.stderr)
        return 1
    with open(sys.argv[1]) as spec_file:
        spec = json.load(spec_file)
    result = {}
    try:
        result["visible_libraries"] = hide_libraries(spec)
    except OSError as error:
        result["skip"] = f"cannot hide the system libraries in a mount namespace: {error}"
    if "skip" not in result:
        result.update(scenario(spec))
    with open(spec["result"], "w") as out:
        json.dump(result, out, indent=1)
    return SKIP if "skip" in result else 0


if __name__ == "__main__":
    sys.exit(main())
