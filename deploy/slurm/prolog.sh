#!/bin/bash
# Slurm Prolog: starts this job's flopscoped on this node, as the job's user, before its first
# task (with PrologFlags=Alloc, at allocation). slurm.conf: Prolog=/etc/slurm/prolog.sh.
#
# One daemon per job and node: the socket directory is the job user's alone (mode 0700), so only
# that user's tasks reach it, and jobs sharing a node never see each other's records. The daemon
# runs detached (its own session) until epilog.sh stops it. With `upstream` set in
# flopscope-slurm.conf it forwards every rank to the cluster's aggregator.
#
# Always exits 0: a failing Prolog drains the node, and a job must never lose its node because
# profiling could not start. A daemon that does not come up is logged to slurmd's log; the job's
# injector then spools its records (FLOPSCOPE_SPOOL_DIR) and says so when it exits.
set -u
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=flopscope-slurm.conf
. "$here/flopscope-slurm.conf"

log() { echo "flopscope prolog: job ${SLURM_JOB_ID:-?} on ${node:-?}: $*" >&2; }

node=${SLURMD_NODENAME:-$(hostname -s)}
job=${SLURM_JOB_ID:?Slurm sets SLURM_JOB_ID}
uid=${SLURM_JOB_UID:?Slurm sets SLURM_JOB_UID}
gid=${SLURM_JOB_GID:-$(id -g "$uid")}
run_dir="$run_root/$node/job-$job"
data_dir="$data_root/$node/job-$job"
socket="$run_dir/flopscope.sock"

if ! install -d -m 0755 "$run_root/$node" "$data_root/$node" ||
   ! install -d -m 0700 -o "$uid" -g "$gid" "$run_dir" "$data_dir"; then
  log "cannot create $run_dir or $data_dir; not profiling this job here"
  exit 0
fi

# With an aggregator (upstream in flopscope-slurm.conf) the daemon forwards every rank to it. The
# daemon runs as the job's user: over TCP it gets copies of that user's certificate and key in the
# socket directory, which the epilog removes. Any trouble: no forwarding, the node keeps its ranks.
forward=()
if [[ -n "${upstream:-}" ]]; then
  forward=(--upstream "$upstream" --upstream-drain-s "${forward_timeout_s:-30}")
  if [[ "$upstream" != unix:* ]]; then
    user=${SLURM_JOB_USER:-$(id -nu "$uid")}
    tls_dir="$run_dir/tls"
    cert=${tls_cert:-}
    key=${tls_key:-}
    if install -d -m 0700 -o "$uid" -g "$gid" "$tls_dir" &&
       install -m 0644 -o "$uid" -g "$gid" "${cert//%u/$user}" "$tls_dir/cert.pem" &&
       install -m 0600 -o "$uid" -g "$gid" "${key//%u/$user}" "$tls_dir/key.pem" &&
       install -m 0644 -o "$uid" -g "$gid" "${tls_ca:-}" "$tls_dir/ca.pem"; then
      forward+=(--tls-cert "$tls_dir/cert.pem" --tls-key "$tls_dir/key.pem"
                --tls-ca "$tls_dir/ca.pem")
    else
      log "no certificate for $user (tls_cert, tls_key, tls_ca); not forwarding to $upstream"
      forward=()
    fi
  fi
fi

# setsid: no controlling terminal and a session of its own, so nothing slurmd does to the
# prolog's process group reaches it. setpriv: the job user's uid, gid and groups, nothing more.
setsid setpriv --reuid="$uid" --regid="$gid" --init-groups --no-new-privs \
  "$prefix/bin/flopscoped" --data-dir "$data_dir" --socket "$socket" --log-level info \
  "${forward[@]}" </dev/null >>"$data_dir/flopscoped.log" 2>&1 &
echo $! >"$run_dir/flopscoped.pid"

deadline=$((SECONDS + start_timeout_s))
until "$prefix/bin/flopscope" jobs --socket "$socket" >/dev/null 2>&1; do
  if ! kill -0 "$(cat "$run_dir/flopscoped.pid")" 2>/dev/null || ((SECONDS >= deadline)); then
    log "flopscoped did not serve $socket within ${start_timeout_s}s; see $data_dir/flopscoped.log"
    exit 0
  fi
  sleep 0.1
done
exit 0
