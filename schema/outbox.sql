-- <data_dir>/outbox.sqlite: a node daemon's store-and-forward queue (flopscoped --upstream;
-- docs/architecture.md, "Forwarding"). Holds every batch committed here that the aggregator has
-- not acknowledged yet, and per session the watermark of what it has. Applied on every open, so
-- every statement is idempotent; version 1 is this file (a file made before put_ns or stub_seq
-- existed gets the column, and put_ns's index, from Outbox::Open).

CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version(version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM schema_version);

-- One row per producer session seen since --upstream was set.
CREATE TABLE IF NOT EXISTS outbox_sessions(
  id INTEGER PRIMARY KEY,
  job_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  session_id TEXT NOT NULL,
  hello BLOB NOT NULL,       -- serialized flopscope.v1.SessionHello, without its resume token
  owner_uid INTEGER NOT NULL,  -- the job's owner here: the aggregator records it as the owner
  -- The session's resume token upstream: drawn here before its first hello, so that an
  -- aggregator killed between keeping it and answering cannot lock the session out.
  upstream_token TEXT NOT NULL,
  acked_seq INTEGER NOT NULL DEFAULT 0,     -- watermark: every seq <= this is committed upstream
  dropped_batches INTEGER NOT NULL DEFAULT 0,  -- never forwarded: outbox full or refused upstream
  -- The seq of the stub waiting in place of the batches the full outbox dropped (0: none): their
  -- final flag and loss counters, which carries LOSS_CAUSE_FORWARD_DROPPED upstream.
  stub_seq INTEGER NOT NULL DEFAULT 0,
  UNIQUE(job_id, rank, session_id)
);

-- Batches a full outbox dropped, one row each (a resend of one is neither counted nor put again):
-- their records go upstream as the session's cumulative LOSS_CAUSE_FORWARD_DROPPED counter.
CREATE TABLE IF NOT EXISTS outbox_dropped(
  session INTEGER NOT NULL,  -- outbox_sessions.id
  seq INTEGER NOT NULL,
  records INTEGER NOT NULL,  -- the batch's records as a producer counts them
  PRIMARY KEY(session, seq)
) WITHOUT ROWID;

-- Batches committed here and not yet acknowledged upstream, as serialized flopscope.v1.Batch.
CREATE TABLE IF NOT EXISTS outbox_batches(
  session INTEGER NOT NULL,  -- outbox_sessions.id
  seq INTEGER NOT NULL,
  put_ns INTEGER NOT NULL DEFAULT 0,  -- when it was put here (unix ns): the forwarding lag
  batch BLOB NOT NULL,
  PRIMARY KEY(session, seq)
) WITHOUT ROWID;
