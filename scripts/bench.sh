#!/usr/bin/env bash
# Runs every benchmark program; each prints its own measured figures and ratios from one run.
set -euo pipefail
build=${1:-build}
for program in nvtx_overhead launch_overhead ingest import_throughput report_benchmark aggregator_scale \
    torch_hooks; do
  echo "== $program"
  "$build/bench/$program"
done
