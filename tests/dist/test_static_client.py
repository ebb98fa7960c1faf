"""The `flopscope` client is linked with its dependencies' static archives (ctest
`client_static_link`, built with -DFLOPSCOPE_STATIC_CLIENT=ON, the default).

cmake/link_with_archives.sh swaps each system shared library on the client's link line for the
archive beside it. This checks what came of it: the program asks the loader for none of the
libraries that have an archive (gRPC, protobuf, Abseil, OpenSSL, SQLite, zlib, re2, c-ares), only
for the C/C++ runtime and the libraries without one; each library is in the program once (no
shared copy of one it holds); and it runs: `--version`, and `jobs` against no daemon, which must
fail with the client's own message, not the loader's.

Usage: test_static_client.py PATH-TO-flopscope"""

import re
import subprocess
import sys
import unittest
from pathlib import Path

CLIENT = Path(sys.argv.pop(1)) if len(sys.argv) > 1 else None
# What Debian ships no archive of, or the runtime the compiler links: may stay shared.
ALLOWED = re.compile(
    r"^(ld-linux-x86-64|libc|libm|libmvec|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libatomic|"
    r"libsimdjson)\.so")
# Libraries the archives replace; none may be asked for.
SWAPPED = re.compile(r"^lib(grpc|gpr|upb|address_sorting|re2|cares|protobuf|absl_|ssl|crypto|"
                     r"sqlite3|z)\b")


def needed(path):
    """The DT_NEEDED entries of an ELF file, as readelf prints them."""
    out = subprocess.run(["readelf", "-d", str(path)], check=True, capture_output=True,
                         text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


class StaticClientTest(unittest.TestCase):
    def test_asks_the_loader_only_for_the_runtime(self):
        libraries = needed(CLIENT)
        self.assertTrue(libraries, "readelf found no NEEDED entry at all")
        swapped = [name for name in libraries if SWAPPED.match(name)]
        self.assertEqual(swapped, [], f"still linked shared: {swapped}")
        unexpected = [name for name in libraries if not ALLOWED.match(name)]
        self.assertEqual(unexpected, [], f"shared libraries nobody listed: {unexpected}")

    def test_no_library_is_in_the_program_twice(self):
        # A shared library left on the line must not bring one the archives already hold.
        resolved = subprocess.run(["ldd", str(CLIENT)], check=True, capture_output=True,
                                  text=True).stdout
        loaded = re.findall(r"^\s*(\S+\.so[.\d]*)\s", resolved, re.M)
        self.assertEqual([name for name in loaded if SWAPPED.match(name)], [], resolved)

    def test_it_runs(self):
        version = subprocess.run([str(CLIENT), "--version"], capture_output=True, text=True,
                                 timeout=30)
        self.assertEqual(version.returncode, 0, version.stderr)
        self.assertRegex(version.stdout, r"^\d+\.\d+\.\d+")
        # gRPC's static start-up (its plugins, the channel) is exercised against a socket
        # nobody serves: the client's own error, rc 1.
        jobs = subprocess.run([str(CLIENT), "jobs", "--socket", "/nonexistent/flopscope.sock"],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(jobs.returncode, 1, jobs.stderr)
        self.assertIn("flopscope:", jobs.stderr)


if __name__ == "__main__":
    if CLIENT is None or not CLIENT.is_file():
        sys.exit("usage: test_static_client.py PATH-TO-flopscope")
    unittest.main(verbosity=2)
