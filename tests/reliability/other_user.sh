#!/bin/bash
# other_user.sh [DIR]: the campaign's rows 3b and 7b (docs/reliability-rerun.md). Creates the
# users rel_alice and rel_mallory (removed at the end), runs alice's jobs on a root daemon (which
# also serves plain loopback TCP on port 47031) and shows what mallory can read, write and profile
# there, over the socket and over TCP. Root. hostile.py needs Python stubs of proto/ in PY_STUBS:
#   protoc -I proto --python_out=$PY_STUBS --grpc_out=$PY_STUBS \
#     --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin proto/flopscope/v1/*.proto
. "$(dirname "$0")/common.sh"
D=${1:-/tmp/campaign/t7}; rm -rf $D; mkdir -p $D; chmod 755 $D
for u in rel_alice rel_mallory; do userdel $u 2>/dev/null; useradd -M -N -s /usr/sbin/nologin $u; mkdir -p $D/spool-$u; chown $u $D/spool-$u; chmod 700 $D/spool-$u; done
as() { local u=$1; shift; runuser -u $u -- env PATH=$BIN:/usr/bin:/bin FLOPSCOPE_SPOOL_DIR=$D/spool-$u PYTHONPATH=${PY_STUBS:-/tmp/campaign/py} "$@"; }
start_daemon $D --tcp localhost:47031 --insecure-loopback-tcp
ls -l $D/s.sock
as rel_alice flopscope run --job alicejob --socket $D/s.sock -- $BIN/nvtx_minimal --repeat 10 >/dev/null 2>$D/alice.err; echo "alice job rc $?"; cat $D/alice.err
as rel_alice sh -c "echo \$\$ > $D/spool-rel_alice/alicelive.pid; exec env RANK=0 flopscope run --job alicelive --socket $D/s.sock -- $BIN/transformer_nvtx --steps 1000000 --hidden 16 --batch 1 --seq 8 --vocab 64" >/dev/null 2>&1 &
flopscope run --job rootjob --socket $D/s.sock -- $BIN/nvtx_minimal --repeat 10 >/dev/null 2>&1
sleep 3
echo "--- alice: jobs"; as rel_alice flopscope jobs --socket $D/s.sock
echo "--- mallory: jobs"; as rel_mallory flopscope jobs --socket $D/s.sock; echo "rc $?"
for c in "ranks alicejob" "report alicejob" "report rootjob" "export alicejob -o $D/x.json --format chrome" "profile alicelive --count 2"; do
  echo "--- mallory: $c"; as rel_mallory flopscope $c --socket $D/s.sock 2>&1 | head -3; echo "rc ${PIPESTATUS[0]}"; done
VS=$(sqlite3 $D/data/jobs/alicejob/rank-00000.sqlite 'select session_id from sessions')
echo "--- mallory: hostile hello into alicejob, resume alice's session $VS"
as rel_mallory /usr/bin/python3 $R/hostile.py $D/s.sock alicejob "$VS" hello_into_victim_job resume_victim_session_no_token victim_session_other_job
echo "--- mallory: import into alicejob"; echo '{"traceEvents":[]}' > $D/t.json; chmod 644 $D/t.json
as rel_mallory flopscope import $D/t.json --job alicejob --socket $D/s.sock 2>&1 | tail -2
echo "--- alice's job after all that"; as rel_alice flopscope ranks alicejob --socket $D/s.sock
echo "--- mallory over loopback TCP"; for t in ipv4:127.0.0.1:47031 localhost:47031; do as rel_mallory flopscope jobs --socket $t 2>&1 | head -3; echo "rc ${PIPESTATUS[0]}";
  as rel_mallory flopscope report alicejob --socket $t 2>&1 | head -2; done
as rel_mallory env FLOPSCOPE_SERVER=127.0.0.1:47031 flopscope jobs 2>&1 | head -2
echo "--- mallory: EACCES on the socket"; mkdir -p $D/private; chmod 700 $D/private
$BIN/flopscoped --data-dir $D/data2 --socket $D/private/p.sock --collect-spools >$D/p.log 2>&1 & PP=$!; sleep 2
as rel_mallory flopscope jobs --socket $D/private/p.sock 2>&1 | head -3
as rel_mallory flopscope run --job mjob --socket $D/private/p.sock -- $BIN/nvtx_minimal --repeat 5 2>&1 | grep -v 'no GPU\|no CUDA' | head -3
kill $PP
echo "--- daemon log: refusals"; grep -i 'refus\|denied\|permission' $D/d.log | head -8
kill $(cat $D/spool-rel_alice/alicelive.pid); sleep 1
kill $(cat $D/d.pid); sleep 1
for u in rel_alice rel_mallory; do userdel $u; done; id rel_alice rel_mallory 2>&1
