#!/bin/bash
# Slurm TaskProlog: points every task of the job at its node's daemon (started by prolog.sh).
# Runs as the job's user before each task; Slurm adds each `export NAME=value` line printed on
# stdout to the task's environment. slurm.conf: TaskProlog=/etc/slurm/task_prolog.sh.
#
# FLOPSCOPE_JOB_ID is "<job id>.<step id>", Slurm's own name for a step, so every srun of a job
# is a flopscope job of its own. Ranks come from SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID,
# which the injector reads by itself. The task is profiled when it runs under the injector:
# `srun flopscope run -- python train.py` (or LD_PRELOAD=$prefix/lib/libflopscope_inject.so).
set -u
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=flopscope-slurm.conf
. "$here/flopscope-slurm.conf"

node=${SLURMD_NODENAME:-$(hostname -s)}
socket="$run_root/$node/job-${SLURM_JOB_ID}/flopscope.sock"
# No daemon here (the prolog could not start one): leave the task's environment alone.
[[ -S "$socket" ]] || exit 0
echo "export FLOPSCOPE_SOCKET=$socket"
echo "export FLOPSCOPE_JOB_ID=${SLURM_JOB_ID}.${SLURM_STEP_ID:-${SLURM_STEPID:-0}}"
exit 0
