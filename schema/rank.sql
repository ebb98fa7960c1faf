-- One file per job and rank: <data_dir>/jobs/<job>/rank-<NNNNN>.sqlite (DESIGN: Storage).
-- Applied on every open, so every statement is idempotent; version 5 is this file (4 added the
-- folded storage of old steps: kernel_folds, range_folds; 5 range_instance_ids). Files written
-- by versions 1 and 2 lack some columns, which CREATE TABLE IF NOT EXISTS cannot add: the daemon
-- adds them (daemon/store/rank_schema.h) and then moves schema_version forward. Columns added since
-- version 1 are marked "(v2)" or "(v3)" and carry a DEFAULT, as ALTER TABLE ... ADD COLUMN
-- requires.
--
-- Conventions: `sid` is the local integer key of a session (one process instance). Protobuf
-- uint64 values (ids, correlation ids, thread ids) are stored bit-for-bit in INTEGER columns, so
-- values above 2^63 read back negative in plain SQL; the daemon casts them back.

CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version(version) SELECT 5 WHERE NOT EXISTS (SELECT 1 FROM schema_version);

-- Identity from the SessionHello, and how far the session got. last_seq is the highest batch
-- sequence number committed; a batch at or below it is a duplicate.
CREATE TABLE IF NOT EXISTS sessions(
  sid INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL UNIQUE,
  job_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  local_rank INTEGER NOT NULL,
  world_size INTEGER NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  injector_version TEXT NOT NULL,
  start_time_ns INTEGER NOT NULL,
  command TEXT NOT NULL,
  gpu_status TEXT NOT NULL,
  hello BLOB NOT NULL,  -- serialized flopscope.v1.SessionHello
  last_seq INTEGER NOT NULL DEFAULT 0,
  first_seen_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL,
  range_events INTEGER NOT NULL DEFAULT 0,
  kernels INTEGER NOT NULL DEFAULT 0,
  final INTEGER NOT NULL DEFAULT 0  -- 1 once a batch marked `final` was committed
);

-- Interned kernel names.
CREATE TABLE IF NOT EXISTS strings(
  sid INTEGER NOT NULL,
  id INTEGER NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(sid, id)
) WITHOUT ROWID;

-- The range tree; parent_id 0 is the root.
CREATE TABLE IF NOT EXISTS range_paths(
  sid INTEGER NOT NULL,
  id INTEGER NOT NULL,
  parent_id INTEGER NOT NULL,
  domain TEXT NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY(sid, id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS range_events(
  sid INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  instance_id INTEGER NOT NULL,
  parent_instance_id INTEGER NOT NULL,
  thread_id INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  -- (v2) 1: closed while a counter window was open (replay-slowed): kept out of every rollup.
  counted INTEGER NOT NULL DEFAULT 0
);

-- GPU activities. Deliberately no secondary index: ingest speed comes first, and reports read
-- module_stats instead of this table.
CREATE TABLE IF NOT EXISTS kernels(
  sid INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  range_instance_id INTEGER NOT NULL,
  name_id INTEGER NOT NULL,
  device_id INTEGER NOT NULL,
  context_id INTEGER NOT NULL,
  stream_id INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  grid_x INTEGER NOT NULL,
  grid_y INTEGER NOT NULL,
  grid_z INTEGER NOT NULL,
  block_x INTEGER NOT NULL,
  block_y INTEGER NOT NULL,
  block_z INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  graph_id INTEGER NOT NULL,
  graph_node_id INTEGER NOT NULL,
  -- (v2) 1: launched inside a counter window (replay-serialised): kept out of every rollup.
  counted INTEGER NOT NULL DEFAULT 0
);

-- Counted FLOPs of the kernels profiled in counter windows (flopscope.v1.KernelFlops). tensor:
-- JSON object {"<source>": flops, ...}; raw: the serialized flopscope.v1.FlopCounters, kept for
-- audit; counted_step: the process's step ordinal, -1 when no step was open (files of version 1
-- hold 0 there for "no step"). The attribution columns were joined from `kernels` when a version 1
-- file was upgraded; phase_path_id is 0 in such rows.
CREATE TABLE IF NOT EXISTS kernel_flops(
  sid INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  fp64 REAL NOT NULL,
  fp32 REAL NOT NULL,
  fp16 REAL NOT NULL,
  tensor TEXT NOT NULL,
  raw BLOB NOT NULL,
  counted_step INTEGER NOT NULL,
  path_id INTEGER NOT NULL DEFAULT 0,            -- (v2)
  range_instance_id INTEGER NOT NULL DEFAULT 0,  -- (v2)
  name_id INTEGER NOT NULL DEFAULT 0,            -- (v2)
  device_id INTEGER NOT NULL DEFAULT 0,          -- (v2)
  phase_path_id INTEGER NOT NULL DEFAULT 0       -- (v2)
);

-- (v2) Counter windows as the process reported them (flopscope.v1.CounterWindowRecord).
CREATE TABLE IF NOT EXISTS counter_windows(
  sid INTEGER NOT NULL,
  first_step INTEGER NOT NULL,
  last_step INTEGER NOT NULL,
  trigger TEXT NOT NULL,
  metric_set TEXT NOT NULL,
  chip TEXT NOT NULL,
  passes INTEGER NOT NULL,
  kernels_counted INTEGER NOT NULL,
  ranges_unmatched INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  status TEXT NOT NULL,
  comm_kernels_excluded INTEGER NOT NULL DEFAULT 0  -- (v3) NCCL & co. kept out of kernel replay
);

CREATE TABLE IF NOT EXISTS metadata(
  sid INTEGER NOT NULL,
  time_ns INTEGER NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL
);

-- Cumulative per session and cause; the daemon keeps the maximum it has seen.
CREATE TABLE IF NOT EXISTS losses(
  sid INTEGER NOT NULL,
  cause INTEGER NOT NULL,
  records INTEGER NOT NULL,
  PRIMARY KEY(sid, cause)
) WITHOUT ROWID;

-- The rollup kept current at ingest: SELF figures of each range path (path_id 0 holds the
-- kernels launched with no range open). Reports add descendants themselves. Counted range events
-- and activities (counted = 1) are left out of calls .. gpu_time_ns, of memory_stats and of
-- instance_stats: kernel replay slowed them down (DESIGN: FLOPs).
--   calls, cpu_time_ns, min_ns, max_ns: closed range events of the path (push to pop);
--   kernels, gpu_time_ns: kernels attributed to the path, durations summed (memcpy / memset
--     are in memory_stats; files written before kernel tracing counted them here too);
--   flops: counted FLOPs of the path's kernel_flops rows, all precisions, NULL while none;
--   counted_kernels (v2): how many kernel_flops rows those are.
CREATE TABLE IF NOT EXISTS module_stats(
  sid INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  calls INTEGER NOT NULL DEFAULT 0,
  cpu_time_ns INTEGER NOT NULL DEFAULT 0,
  min_ns INTEGER,
  max_ns INTEGER,
  kernels INTEGER NOT NULL DEFAULT 0,
  gpu_time_ns INTEGER NOT NULL DEFAULT 0,
  flops REAL,
  counted_kernels INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(sid, path_id)
) WITHOUT ROWID;

-- (v2) Counted FLOPs by precision, kept current at ingest like module_stats. precision: "fp64",
-- "fp32", "fp16" (CUDA cores) or "tensor:<source>"; kernels: kernel_flops rows with FLOPs of
-- that precision (a kernel counts under each precision it used).
--   module_flops: SELF figures per range path (KernelFlops.path_id);
--   phase_flops: per innermost `flopscope`-domain path open at launch (KernelFlops.phase_path_id,
--     0: none); reports add nested phases to the enclosing ones.
CREATE TABLE IF NOT EXISTS module_flops(
  sid INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  precision TEXT NOT NULL,
  flops REAL NOT NULL DEFAULT 0,
  kernels INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(sid, path_id, precision)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS phase_flops(
  sid INTEGER NOT NULL,
  phase_path_id INTEGER NOT NULL,
  precision TEXT NOT NULL,
  flops REAL NOT NULL DEFAULT 0,
  kernels INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(sid, phase_path_id, precision)
) WITHOUT ROWID;

-- (v2) The steps a session counted: every counted_step >= 0 of its kernel_flops rows and every
-- step of its windows that did not fail. Reports divide counted FLOPs by how many there are (one
-- for a session with counted FLOPs but no step marks).
CREATE TABLE IF NOT EXISTS counted_steps(
  sid INTEGER NOT NULL,
  step INTEGER NOT NULL,
  PRIMARY KEY(sid, step)
) WITHOUT ROWID;

-- Memory copies and sets, apart from kernels: SELF figures per path and kind (2 memcpy,
-- 3 memset: flopscope.v1.ActivityKind), kept current at ingest like module_stats.
CREATE TABLE IF NOT EXISTS memory_stats(
  sid INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  count INTEGER NOT NULL DEFAULT 0,
  time_ns INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(sid, path_id, kind)
) WITHOUT ROWID;

-- Kernels per range occurrence (the innermost range instance open at their launch), kept
-- current at ingest: the basis of a module's GPU span and busy time, which reports roll up to
-- enclosing occurrences through range_events.parent_instance_id. Kernels replayed from a CUDA
-- graph and attributed to the range that captured them have no occurrence of their own: each
-- (graph launch, path) counts as one, keyed with the top bit set (never a real instance id):
-- instance_id = 2^63 | correlation_id << 21 | path_id (stored bit-for-bit, so negative in SQL).
--   first_start_ns / last_end_ns: span of the occurrence's own kernels;
--   busy_ns: time some of them ran (union of intervals; exact when batches arrive in time order,
--     as the injector sends them).
CREATE TABLE IF NOT EXISTS instance_stats(
  sid INTEGER NOT NULL,
  instance_id INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  kernels INTEGER NOT NULL,
  first_start_ns INTEGER NOT NULL,
  last_end_ns INTEGER NOT NULL,
  busy_ns INTEGER NOT NULL,
  PRIMARY KEY(sid, instance_id)
) WITHOUT ROWID;

-- (v4) Storage that lasts a week-long job (DESIGN: Storage, daemon/store/step_folding.h). Once a rank has
-- more than --keep-raw-steps steps, the records of the older steps are folded, in one
-- transaction, into the two tables below; every report figure stays exact.
--   kernel_folds: the uncounted `kernels` rows that ended before a fold's horizon, grouped as
--     `report --kernels` groups them (their rows are deleted). Counted kernels stay raw.
--   range_folds: a commit-order prefix of range_events (each event with its instance_stats row,
--     deleted from both tables) packed into `data` (daemon/store/range_fold_codec.h); reports decode
--     the folds in rowid order before the raw events, so they see the same events in the same
--     order. start_ns / end_ns: the time the folded events cover; horizon_ns: kernels that ended
--     before it are only in kernel_folds (no raw kernel, so no trace, for that time).
CREATE TABLE IF NOT EXISTS kernel_folds(
  sid INTEGER NOT NULL,
  path_id INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  name_id INTEGER NOT NULL,
  count INTEGER NOT NULL,
  total_ns INTEGER NOT NULL,
  min_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY(sid, path_id, kind, name_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS range_folds(
  events INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  horizon_ns INTEGER NOT NULL,
  data BLOB NOT NULL
);

-- (v5) The range instance ids each session has stored, as closed intervals [lo, hi] (stored
-- bit-for-bit like every id), so that a later batch repeating an occurrence is refused rather
-- than counted twice (a resent batch is dropped earlier, by seq: sessions.last_seq). Kept when
-- steps are folded. A session holds a few rows: one per range still open and one per run of
-- records dropped before they were sent (daemon/store/instance_id_set.h). Sessions a version 4 file
-- already held start with none: only ids stored from then on are checked.
CREATE TABLE IF NOT EXISTS range_instance_ids(
  sid INTEGER NOT NULL,
  lo INTEGER NOT NULL,
  hi INTEGER NOT NULL,
  PRIMARY KEY(sid, lo)
) WITHOUT ROWID;

-- The latest snapshot of each session's open ranges (flopscope.v1.OpenRanges, serialized), for
-- `flopscope where`: replaced only by a newer one (time_ns), so a batch replayed from a spool
-- never puts an older one back. Files written before it lack the table until a writer opens
-- them; readers treat a missing table as no snapshot (daemon/query/open_ranges_reader.h).
CREATE TABLE IF NOT EXISTS open_ranges(
  sid INTEGER PRIMARY KEY,
  time_ns INTEGER NOT NULL,
  snapshot BLOB NOT NULL
);
