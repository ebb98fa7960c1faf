"""Starts the ranks of one job the way a launcher (torchrun, srun) does: every rank a child of this
one process, so that the job is one session however many ranks it has. Waits for them all, then
prints a JSON list with each rank's exit code and stderr.

Why a session matters: Linux's autogroup scheduler (kernel.sched_autogroup_enabled) shares the
CPU fairly between sessions, then between the tasks of each. 64 ranks started straight from a
test are in the test's own session, beside the daemon and the `flopscope` commands it runs, so a
query gets 1/66 of that session's CPU; started from a launcher in a session of its own, as a job
is, they share the CPU with the querying shell as one group.

    python3 rank_launcher.py SOCKET JOB WORLD FLOPSCOPE -- COMMAND...
"""

import json
import os
import subprocess
import sys


def main(argv):
    socket, job, world, flopscope = argv[1], argv[2], int(argv[3]), argv[4]
    command = argv[argv.index("--") + 1:]
    processes = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        processes.append(subprocess.Popen(
            [flopscope, "run", "--job", job, "--socket", socket, "--", *command], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    ended = []
    for process in processes:
        _, err = process.communicate()
        ended.append({"returncode": process.returncode, "stderr": err})
    json.dump(ended, sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
