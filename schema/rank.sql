-- One file per job and rank: <data_dir>/jobs/<job>/rank-<NNNNN>.sqlite (DESIGN: Storage).
-- Applied on every open, so every statement is idempotent. Later migrations check
-- schema_version and move it forward; version 1 is this file.
--
-- Conventions: `sid` is the local integer key of a session (one process instance). Protobuf
-- uint64 values (ids, correlation ids, thread ids) are stored bit-for-bit in INTEGER columns, so
-- values above 2^63 read back negative in plain SQL; the daemon casts them back.

CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version(version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM schema_version);

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
  kind INTEGER NOT NULL
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
  graph_node_id INTEGER NOT NULL
);

-- Counted FLOPs of the kernels profiled in counter windows. tensor: JSON object
-- {"<source>": flops, ...}; raw: the serialized flopscope.v1.FlopCounters, kept for audit.
CREATE TABLE IF NOT EXISTS kernel_flops(
  sid INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL,
  fp64 REAL NOT NULL,
  fp32 REAL NOT NULL,
  fp16 REAL NOT NULL,
  tensor TEXT NOT NULL,
  raw BLOB NOT NULL,
  counted_step INTEGER NOT NULL
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
-- kernels launched with no range open). Reports add descendants themselves.
--   calls, cpu_time_ns, min_ns, max_ns: closed range events of the path (push to pop);
--   kernels, gpu_time_ns: kernels attributed to the path, durations summed (memcpy / memset
--     are in memory_stats; files written before kernel tracing counted them here too);
--   flops: counted FLOPs of those activities, NULL while none was counted.
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
  PRIMARY KEY(sid, path_id)
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
