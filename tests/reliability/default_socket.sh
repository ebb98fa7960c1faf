#!/bin/bash
# default_socket.sh [DIR]: the campaign's row 7e (docs/reliability-rerun.md), in a private mount
# namespace so that the real /run is untouched:
#   unshare -m --propagation private bash tests/reliability/default_socket.sh
# Mounts a tmpfs on /run, creates rel_alice and rel_mallory (removed at the end), lets mallory
# squat the old fallback paths in /tmp, starts root's daemon with the default socket and shows
# where alice's default job goes. Root.
. "$(dirname "$0")/common.sh"
D=${1:-/tmp/campaign/t7e}; rm -rf $D; mkdir -p $D; chmod 755 $D
mount -t tmpfs -o mode=0755 tmpfs /run
for u in rel_alice rel_mallory; do userdel $u 2>/dev/null; useradd -M -N -s /usr/sbin/nologin $u; mkdir -p $D/spool-$u; chown $u $D/spool-$u; chmod 700 $D/spool-$u; done
mkdir -p $D/mallory-data; chown rel_mallory $D/mallory-data
as() { local u=$1; shift; runuser -u $u -- env -u FLOPSCOPE_SOCKET -u XDG_RUNTIME_DIR PATH=$BIN:/usr/bin:/bin FLOPSCOPE_SPOOL_DIR=$D/spool-$u "$@"; }
echo "--- before any daemon: where do clients look?"
as rel_alice flopscope jobs 2>&1 | head -2
echo "--- mallory squats the campaign's old fallback paths and /tmp names"
as rel_mallory sh -c "touch /tmp/flopscope-0.sock; $BIN/flopscoped --data-dir $D/mallory-data --socket /tmp/flopscope-$(id -u rel_alice).sock --collect-spools >$D/mallory-data/log 2>&1 & echo \$! > /tmp/mallory.pid" 2>&1
sleep 2; chmod 666 /tmp/flopscope-$(id -u rel_alice).sock 2>/dev/null; ls -l /tmp/flopscope-*.sock
echo "--- root daemon with the default socket (FLOPSCOPE_SOCKET unset)"
env -u FLOPSCOPE_SOCKET $BIN/flopscoped --data-dir $D/data --collect-spools > $D/d.log 2>&1 & DP=$!
sleep 3; head -3 $D/d.log; ls -ld /run/flopscope /run/flopscope/flopscope.sock
echo "--- alice: jobs, then a default job"
as rel_alice flopscope jobs 2>&1 | head -3
as rel_alice flopscope run --job alice-secret-job -- $BIN/nvtx_minimal --repeat 10 2>&1 | grep -v 'no CUDA' | head -3
echo "--- where did alice's job go?"; env -u FLOPSCOPE_SOCKET flopscope jobs 2>&1; as rel_alice flopscope jobs 2>&1
echo "mallory's daemon log: $(grep -c 'connected job' $D/mallory-data/log) connections"; grep 'connected job' $D/mallory-data/log | head -2
kill $DP; kill $(cat /tmp/mallory.pid) 2>/dev/null; sleep 1; rm -f /tmp/flopscope-0.sock /tmp/flopscope-$(id -u rel_alice).sock /tmp/mallory.pid
echo "--- no node daemon, no /run/flopscope: alice's client (XDG_RUNTIME_DIR unset, then a mallory-owned one)"
rm -rf /run/flopscope; as rel_alice flopscope jobs 2>&1 | head -2
mkdir -p $D/xdg-m; chown rel_mallory $D/xdg-m; chmod 700 $D/xdg-m
runuser -u rel_alice -- env XDG_RUNTIME_DIR=$D/xdg-m PATH=$BIN:/usr/bin:/bin $BIN/flopscope jobs 2>&1 | head -2
umount /run
for u in rel_alice rel_mallory; do userdel $u; done
