#!/usr/bin/env bash
# Regenerates the fuzzers' seed corpus, tests/fuzz/corpus/<fuzzer>/, from the small inputs written
# out below (all hand-written for this corpus): batches encoded with protoc from text format, Kineto
# JSON (one copy gzipped), an Nsight Systems export built with sqlite3, mark texts. Run it after a
# change to records.proto or the formats; the fuzzers read the corpus, not this script.
#
#   tests/fuzz/make_seeds.sh   (needs protoc, sqlite3, gzip)
set -euo pipefail

readonly ROOT=$(cd "$(dirname "$0")/../.." && pwd)
readonly CORPUS=$ROOT/tests/fuzz/corpus

seed() {  # seed FUZZER NAME: stdin becomes the seed file
  mkdir -p "$CORPUS/$1"
  cat >"$CORPUS/$1/$2"
}

batch() {  # batch NAME: a text-format v1::Batch on stdin, encoded
  protoc --proto_path="$ROOT/proto" --encode=flopscope.v1.Batch \
    "$ROOT/proto/flopscope/v1/records.proto" | seed batch_validator "$1.pb"
}

rm -rf "$CORPUS"

# ---- batch_validator: one batch of every record kind, and a follow-up that reuses definitions.
batch ranges_and_kernels <<'PB'
seq: 1
strings { id: 1 value: "_Z4gemmPfS_" }
strings { id: 2 value: "ncclKernel_AllReduce" }
paths { id: 1 name: "train_step" domain: "flopscope" }
paths { id: 2 parent_id: 1 name: "Model/layer.0" }
ranges { path_id: 2 instance_id: 1 thread_id: 77 start_ns: 1764000000000000000
         end_ns: 1764000000005000000 kind: RANGE_KIND_PUSH_POP }
ranges { path_id: 1 instance_id: 2 thread_id: 77 start_ns: 1764000000000000000
         end_ns: 1764000000009000000 kind: RANGE_KIND_START_END counted: true }
kernels { correlation_id: 5 path_id: 2 range_instance_id: 1 name_id: 1 stream_id: 7
          start_ns: 1764000000001000000 end_ns: 1764000000002000000 grid_x: 128 grid_y: 1
          grid_z: 1 block_x: 256 block_y: 1 block_z: 1 }
kernels { correlation_id: 6 name_id: 2 start_ns: 1764000000003000000
          end_ns: 1764000000004000000 }
PB
batch flops_windows_metadata <<'PB'
seq: 2
strings { id: 1 value: "_Z4gemmPfS_" }
paths { id: 1 name: "step" domain: "flopscope" }
kernel_flops { correlation_id: 5 path_id: 1 name_id: 1 phase_path_id: 1 counted_step: 3
  flops { fp32: 1.5e9 fp16: 0 tensor { source: "bf16_dst_fp32" flops: 2.5e12 }
             raw { metric: "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum" value: 4096 } } }
windows { first_step: 3 last_step: 4 trigger: "env: steps=3-4" metric_set: "full" chip: "GH100"
          passes: 12 kernels_counted: 40 start_ns: 1764000000000000000
          end_ns: 1764000001000000000 }
metadata { key: "parallel" value: "tp=2 pp=1 dp=4 tp_rank=1" time_ns: 1764000000000000000 }
metadata { key: "params Model/layer.0" value: "1234" }
losses { cause: LOSS_CAUSE_BUFFER_FULL records: 17 }
final: true
PB
batch rejected_undefined_path <<'PB'
seq: 3
ranges { path_id: 99 instance_id: 1 start_ns: 1764000000000000000 end_ns: 1764000000000000001 }
PB
batch open_ranges <<'PB'
seq: 4
paths { id: 1 name: "step" domain: "flopscope" }
paths { id: 2 parent_id: 1 name: "forward" domain: "flopscope" }
paths { id: 3 name: "Net" }
paths { id: 4 parent_id: 3 name: "slowed" }
open_ranges { time_ns: 1764000009000000000
  threads { thread_id: 77 module_depth: 2 phase_depth: 2
            modules { path_id: 3 start_ns: 1764000000002000000 }
            modules { path_id: 4 start_ns: 1764000000003000000 }
            phases { path_id: 1 start_ns: 1764000000000000000 }
            phases { path_id: 2 start_ns: 1764000000001000000 } } }
PB
batch nested_ranges <<'PB'
seq: 4
paths { id: 1 name: "Model" }
paths { id: 2 parent_id: 1 name: "attn" }
ranges { path_id: 2 instance_id: 1026 parent_instance_id: 1025 thread_id: 77
         start_ns: 1764000000001000000 end_ns: 1764000000002000000 kind: RANGE_KIND_PUSH_POP }
ranges { path_id: 1 instance_id: 1025 thread_id: 77 start_ns: 1764000000000000000
         end_ns: 1764000000003000000 kind: RANGE_KIND_PUSH_POP }
PB
batch rejected_repeated_instance <<'PB'
seq: 5
paths { id: 1 name: "Model" }
ranges { path_id: 1 instance_id: 7 start_ns: 1764000000000000000 end_ns: 1764000000000000001 }
ranges { path_id: 1 instance_id: 7 start_ns: 1764000000000000002 end_ns: 1764000000000000003 }
PB

# ---- parallel_mark and metadata_mark: the texts frameworks write.
printf 'tp=2 pp=1 dp=4 tp_rank=1 pp_rank=0 dp_rank=3' | seed parallel_mark layout
printf 'dp=8 dp_rank=9' | seed parallel_mark outside
printf 'tp=0x4 zz=1' | seed parallel_mark not_a_number
printf 'parallel tp=2 pp=1 dp=4' | seed metadata_mark parallel
printf 'params Model/layer.0=1234' | seed metadata_mark params
printf ' batch_size = 32 ' | seed metadata_mark spaces
printf 'flops Model/a=b/c=99' | seed metadata_mark last_equals

# ---- python_repr: what Kineto stores in deviceProperties and distributedInfo.
printf "%s" "[{'id': 0, 'name': 'NVIDIA A100', 'totalGlobalMem': 42, 'computeMajor': 8, 'numSms': 108}]" \
  | seed python_repr device_properties
printf "%s" "{'backend': 'nccl', 'rank': 3, 'world_size': 4, 'pg_config': {'0': (1, 2,)}, 'x': None}" \
  | seed python_repr distributed_info
printf "%s" "['it\\'s', \"say \\\"hi\\\"\", '\\x41\\u00e9\\U0001F600', 1e-05, -inf, nan, True]" \
  | seed python_repr escapes_numbers

# ---- Kineto JSON: the splitter and the whole reader share these.
kineto() {  # kineto NAME: JSON on stdin, for both JSON fuzzers
  local text
  text=$(cat)
  printf '%s\n' "$text" | seed json_event_splitter "$1.json"
  printf '%s\n' "$text" | seed kineto_trace_reader "$1.json"
}
kineto modules_kernels <<'JSON'
{"schemaVersion": 1, "baseTimeNanoseconds": 1764000000000000000,
 "deviceProperties": "[{'id': 0, 'name': 'NVIDIA H100', 'totalGlobalMem': 80, 'computeMajor': 9, 'computeMinor': 0, 'numSms': 132}]",
 "distributedInfo": "{'backend': 'nccl', 'rank': 1, 'world_size': 2}",
 "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 9, "tid": 9, "ts": 1, "dur": 100},
  {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 9, "tid": 9, "ts": 2, "dur": 50,
   "args": {"Python id": 2, "Python parent id": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "ts": 3, "dur": 10},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 4.5, "dur": 1,
   "args": {"correlation": 11, "cbid": 211}},
  {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 6, "dur": 2.25,
   "args": {"device": 0, "context": 1, "stream": 7, "correlation": 11, "grid": [4, 2, 1], "block": [128, 1, 1]}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 9, "dur": 1,
   "args": {"device": 0, "stream": 7, "correlation": 12, "bytes": 64}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "block", "pid": 0, "tid": 7, "ts": 5, "dur": 20},
  {"ph": "X", "cat": "cuda_profiler_range", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 6, "dur": 2,
   "args": {"correlation": 11, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2048}},
  {"ph": "i", "cat": "user_annotation", "name": "flopscope: batch_size=8", "pid": 9, "tid": 9, "ts": 7, "s": "t"},
  {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "python"}}
 ]}
JSON
kineto legacy_array <<'JSON'
[{"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 3, "tid": 3, "ts": 10, "dur": 4},
 {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 3, "tid": 3, "ts": 11, "dur": 1,
  "args": {"correlation": 2}},
 {"ph": "X", "cat": "Kernel", "name": "add_kernel", "pid": 0, "tid": 1, "ts": 12, "dur": 1,
  "args": {"device": 0, "stream": 7, "correlation": 2}},
 {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoH", "pid": 0, "tid": 1, "ts": 14, "dur": 1,
  "args": {"device": 0, "stream": 7, "correlation": 3, "bytes": 8}}]
JSON
printf '%s' '{"traceEvents": [{"ph": "X", "name": "a\u00e9\"}", "ts": 1e1, "dur": -1, "args": {"nested": [[{}], "]"]}}], "x": [1, {"y": null}]}' \
  | seed json_event_splitter strings_nesting.json
gzip -n -c "$CORPUS/kineto_trace_reader/modules_kernels.json" \
  | seed kineto_trace_reader modules_kernels.json.gz

# ---- Nsight Systems export: the current schema in a small SQLite file (512-byte pages).
mkdir -p "$CORPUS/nsys_export_reader"
readonly NSYS=$CORPUS/nsys_export_reader/current_schema.sqlite
sqlite3 "$NSYS" <<'SQL'
PRAGMA page_size = 512;
CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, '_Z4gemmv'), (2, 'gemm()'), (3, 'cudaLaunchKernel_v7000'),
  (4, 'Model/layer.0'), (5, 'flopscope'), (6, 'step');
CREATE TABLE ENUM_NSYS_EVENT_TYPE(id INTEGER PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (34, 'NvtxMark', ''), (59, 'NvtxPushPopRange', ''),
  (60, 'NvtxStartEndRange', ''), (75, 'NvtxDomainCreate', '');
CREATE TABLE META_DATA_EXPORT(name TEXT NOT NULL, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.11.0');
CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1764000000000000000, '', '');
CREATE TABLE TARGET_INFO_GPU(id INTEGER NOT NULL, name TEXT, totalMemory INTEGER, smCount INTEGER,
  clockRate INTEGER, computeMajor INTEGER, computeMinor INTEGER, uuid TEXT, chipName TEXT);
INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100', 80000000000, 132, 1980000000, 9, 0, 'GPU-0',
  'GH100');
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
INSERT INTO NVTX_EVENTS VALUES (0, NULL, 75, NULL, NULL, NULL, NULL, 70368744177765, NULL, 5, 2),
  (10, 900, 59, NULL, NULL, NULL, NULL, 70368744177765, NULL, 6, 2),
  (20, 500, 59, NULL, NULL, NULL, NULL, 70368744177765, NULL, 4, 0),
  (30, 30, 34, NULL, NULL, NULL, 'batch_size=8', 70368744177765, NULL, NULL, 2),
  (40, NULL, 60, NULL, NULL, NULL, 'open', 70368744177765, NULL, NULL, 0);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
  returnValue INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (25, 27, 0, 70368744177765, 9, 3, 0);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
  shortName INTEGER NOT NULL, mangledName INTEGER, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (60, 80, 0, 1, 7, 9, 70368744177664, 2, 2, 1, 4, 1,
  1, 128, 1, 1);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, bytes INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (90, 95, 0, 1, 7, 10, 4096);
VACUUM;
SQL
# ---- spool_file: a session's spool as the transport writes it (common/spool/spool_file.h):
# magic, then {u32 length, u64 seq, u64 records, payload} frames, the hello first.
up() {  # up FILE: a text-format v1::UpMessage on stdin, encoded into FILE
  protoc --proto_path="$ROOT/proto" --encode=flopscope.v1.UpMessage \
    "$ROOT/proto/flopscope/v1/collector.proto" >"$1"
}
spool_dir=$(mktemp -d)
up "$spool_dir/hello" <<'PB'
hello { protocol_version: 1 session_id: "node-1-100-1" job_id: "job-1" rank: 0 world_size: 1
        host: "node-1" pid: 100 start_time_ns: 1764000000000000000 }
PB
up "$spool_dir/batch" <<'PB'
batch { seq: 1 paths { id: 1 name: "work" }
        ranges { path_id: 1 instance_id: 1 thread_id: 1 start_ns: 1764000000000000000
                 end_ns: 1764000000000001000 kind: RANGE_KIND_PUSH_POP }
        final: true }
PB
python3 - "$spool_dir/hello" "$spool_dir/batch" <<'PY' | seed spool_file hello_and_final_batch
import struct, sys
out = sys.stdout.buffer
out.write(b"FSSPOOL1")
for seq, records, path in ((0, 0, sys.argv[1]), (1, 1, sys.argv[2])):
    payload = open(path, "rb").read()
    out.write(struct.pack("<IQQ", len(payload), seq, records) + payload)
PY
rm -rf "$spool_dir"

# ---- made_counts_page: a session's made-counts file (common/made_counts_page.h): a 64-byte
# header (magic, u32 slot count, u32 session length, u32 end signal), 1023 64-byte slots each
# starting with a u64 count, then 8192 bytes for the session that made the records (fixed
# fields, six strings).
made_counts() {  # made_counts NAME NAMED [SIGNAL]: NAMED=1 writes a session; SIGNAL: 2 or 15
  python3 - "$2" "${3:-0}" <<'PY' | seed made_counts_page "$1"
import struct, sys
line, slots, session_area = 64, 1023, 8192
data = bytearray(line * (slots + 1) + session_area)
data[0:8] = b"FSMADE02"
for slot, count in ((0, 3), (1, 8192), (2, 1808)):  # slot 0 is the shared one
    struct.pack_into("<Q", data, line * (slot + 1), count)
session = b""
if sys.argv[1] == "1":
    session = struct.pack("<iii6Iqq", 3, 1, 8, 2, 1, 4, 1, 0, 1, 4242, 1764000000000000000)
    for text in (b"node7-4242-1764000000000000000", b"job-17", b"node7", b"0.9.0", b"env",
                 "python3 train.py --name caf\u00e9".encode()):
        session += struct.pack("<I", len(text)) + text
data[line * (slots + 1):line * (slots + 1) + len(session)] = session
struct.pack_into("<III", data, 8, slots, len(session), int(sys.argv[2]))
sys.stdout.buffer.write(data)
PY
}
made_counts three_slots 0
made_counts named_session 1
made_counts named_sigint 1 2

# ---- latency_sketch: a stored sketch in each form (proto/flopscope/v1/rollups.proto).
sketch() {  # sketch NAME: a text-format v1::LatencySketch on stdin, encoded
  protoc --proto_path="$ROOT/proto" --encode=flopscope.v1.LatencySketch \
    "$ROOT/proto/flopscope/v1/rollups.proto" | seed latency_sketch "$1.pb"
}
sketch exact <<'PB'
count: 4 sum_ns: 4700 min_ns: 1000 max_ns: 1500
exact_deltas_ns: [1000, 100, 100, 300]
PB
sketch bucketed <<'PB'
count: 9 sum_ns: 2100000 min_ns: 0 max_ns: 410000 bucketed: true zero_count: 1
first_bucket: 618 bucket_counts: [3, 0, 0, 4, 1]
PB

echo "seeds: $(find "$CORPUS" -type f | wc -l) files, $(du -sk "$CORPUS" | cut -f1) KiB in $CORPUS"
