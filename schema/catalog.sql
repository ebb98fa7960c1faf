-- <data_dir>/catalog.sqlite: what the daemon holds, for listings (DESIGN: Storage). Applied on
-- every open, so every statement is idempotent; version 3 is this file. Upgrades are additive
-- and happen here, on open: version 2 added rank_rejections (a version 1 file gains the empty
-- table and its version becomes 2; a daemon that reads up to 2 reads either); version 3 added
-- job_owners and session_tokens (the access model).

CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version(version) SELECT 3 WHERE NOT EXISTS (SELECT 1 FROM schema_version);

CREATE TABLE IF NOT EXISTS jobs(
  job_id TEXT PRIMARY KEY,
  first_seen_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL
);

-- One row per rank. Identity columns describe the latest session that connected for the rank;
-- the counts cover every session the rank had (restarts included).
CREATE TABLE IF NOT EXISTS ranks(
  job_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  session_id TEXT NOT NULL,
  devices TEXT NOT NULL,  -- device names joined by ", ", for people reading the file
  hello BLOB NOT NULL,    -- serialized flopscope.v1.SessionHello of the latest session
  connected INTEGER NOT NULL DEFAULT 0,  -- streams open now for this rank
  first_seen_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL,
  sessions INTEGER NOT NULL DEFAULT 0,
  range_events INTEGER NOT NULL DEFAULT 0,
  kernels INTEGER NOT NULL DEFAULT 0,
  lost_records INTEGER NOT NULL DEFAULT 0,
  -- serialized flopscope.v1.ParallelLayout from the rank's latest `parallel` mark (NULL: none);
  -- it wins over the hello's layout, which only knows the environment
  announced_layout BLOB,
  PRIMARY KEY(job_id, rank)
) WITHOUT ROWID;

-- Losses summary per rank: for each cause, the sum over sessions of their cumulative counts.
CREATE TABLE IF NOT EXISTS rank_losses(
  job_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  cause INTEGER NOT NULL,
  records INTEGER NOT NULL,
  PRIMARY KEY(job_id, rank, cause)
) WITHOUT ROWID;

-- Batches the daemon refused (daemon/validate/batch_validator.h), counted where they were dropped: per
-- session and broken rule, with the records they held. Version 2.
CREATE TABLE IF NOT EXISTS rank_rejections(
  job_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  session_id TEXT NOT NULL,
  rule TEXT NOT NULL,
  batches INTEGER NOT NULL,
  records INTEGER NOT NULL,
  PRIMARY KEY(job_id, rank, session_id, rule)
) WITHOUT ROWID;

-- Who owns each job (docs/architecture.md, "Access model"): the uid of the peer whose stream
-- created it, as the kernel reported it. A job with no row (listed before version 3) belongs to
-- the daemon's own user. Version 3.
CREATE TABLE IF NOT EXISTS job_owners(
  job_id TEXT PRIMARY KEY,
  uid INTEGER NOT NULL
) WITHOUT ROWID;

-- SHA-256 of each session's resume token (the one its first hello carried, or the daemon issued
-- in its Welcome): a later hello of the session must present the same token. Version 3.
CREATE TABLE IF NOT EXISTS session_tokens(
  job_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  session_id TEXT NOT NULL,
  digest BLOB NOT NULL,
  PRIMARY KEY(job_id, rank, session_id)
) WITHOUT ROWID;

UPDATE schema_version SET version = 3 WHERE version < 3;
