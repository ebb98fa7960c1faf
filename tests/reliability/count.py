#!/usr/bin/env python3
"""Counts what a flopscoped data dir stored for one job, read-only, straight from the SQLite files
(not through the daemon): per rank the range events the sessions committed, the raw rows left,
duplicates by (sid, instance_id) and by content, sessions (final or not) and the stored loss
counters by cause. Used by the hand reruns of the reliability campaign (docs/reliability-rerun.md).

Usage: count.py DATA_DIR JOB [--json]"""

import json
import sqlite3
import sys
from pathlib import Path

CAUSES = {1: "buffer_full", 2: "daemon_unreachable", 3: "rejected", 4: "unmatched_pop",
          5: "stack_overflow", 6: "too_many_paths", 7: "unclosed_range", 8: "cupti_dropped",
          9: "exit_undelivered", 10: "counter_unmatched", 11: "not_arrived",
          12: "ended_without_final", 13: "killed", 14: "backlog_full"}


def count_rank(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    row = {"file": path.name}
    row["committed"] = db.execute("SELECT COALESCE(SUM(range_events), 0) FROM sessions").fetchone()[0]
    row["raw_rows"] = db.execute("SELECT COUNT(*) FROM range_events").fetchone()[0]
    row["dup_instance"] = db.execute(
        "SELECT COUNT(*) - COUNT(DISTINCT sid || ':' || instance_id) FROM range_events").fetchone()[0]
    row["dup_content"] = db.execute(
        "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM range_events "
        "GROUP BY thread_id, path_id, start_ns, end_ns)").fetchone()[0]
    row["sessions"] = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    row["not_final"] = db.execute("SELECT COUNT(*) FROM sessions WHERE final = 0").fetchone()[0]
    row["losses"] = {CAUSES.get(c, str(c)): n for c, n in
                     db.execute("SELECT cause, SUM(records) FROM losses GROUP BY cause")}
    db.close()
    return row


def main():
    data, job = Path(sys.argv[1]), sys.argv[2]
    ranks = {int(p.stem.split("-")[1]): count_rank(p)
             for p in sorted((data / "jobs" / job).glob("rank-*.sqlite"))}
    total = {k: sum(r[k] for r in ranks.values())
             for k in ("committed", "raw_rows", "dup_instance", "dup_content", "sessions",
                       "not_final")}
    losses = {}
    for r in ranks.values():
        for cause, n in r["losses"].items():
            losses[cause] = losses.get(cause, 0) + n
    total["losses"] = losses
    total["ranks"] = len(ranks)
    if "--json" in sys.argv:
        print(json.dumps({"ranks": ranks, "total": total}))
        return
    for rank, r in ranks.items():
        print(f"rank {rank}: {r}")
    print(f"TOTAL {total}")


if __name__ == "__main__":
    main()
