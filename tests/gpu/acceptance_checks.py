"""What tests/gpu/acceptance.sh computes in Python (standard library only: the GPU node's python3).

  summary TSV                  prints the summary table of TSV (name, status, detail per line)
                               and checks it: exit 1 when a row is malformed
  chip                         the chip name (GH100, ...) of the GPU of compute capability ARGV
  flopscope-kernels DB         per-kernel counted FLOPs of a rank file, as JSON on stdout
  ncu-compare COUNTERS NCU FS  flopscope's FLOPs per kernel (FS: flopscope-kernels JSON) against
                               ncu's raw CSV (NCU) with the FLOP metrics of COUNTERS (`flopscope
                               counters --format json`), kernel by kernel (a kernel: its function
                               name and launch shape; the mean per launch of each side, since
                               flopscope counts two steps and ncu all five); exit 1 when one is
                               off by more than 2 %
  step-ms DB                   durations of the counted and uncounted `step` ranges, JSON
  overhead BASE TIMING DB      overhead of timing-only tracing (per-step wall times of the job
                               without and with the injector) and of a counted step (DB)
  post-window DB [LOG]         kernels stored per uncounted step after the last counted one (DB);
                               exit 1 when a step has none; with LOG (the job's stderr), the
                               tracer's lines on lost activities and the range profiler
  torch-report REPORT [JOB]    checks a `flopscope report --format json` of the torch job with a
                               counter window; exit 1 when it counted nothing; with JOB (the
                               job's --out JSON), each Linear's counted forward FLOPs must be
                               within 5 % of the analytic ones the job wrote
  modules-report REPORT STEPS  checks a report of a job without counters: modules and STEPS steps
  counters-plan COUNTERS       checks `flopscope counters --format json`: metrics that are FLOPs
  flop-metrics COUNTERS        the names of COUNTERS' FLOP metrics, comma-separated (for ncu)

Every command prints one line that acceptance.sh puts in the summary's detail column (the last
line of its stdout)."""

import bisect
import csv
import json
import re
import sqlite3
import statistics
import subprocess
import sys

STATUSES = ("PASS", "FAIL", "SKIPPED")
TOLERANCE = 0.02
# Counted forward FLOPs of a Linear against 2 * tokens * in * out: bias adds and autocast's
# elementwise work ride along in the same module.
FORWARD_TOLERANCE = 0.05
# Compute capability -> chip name, for the chips the acceptance is meant for.
CHIPS = {"7.0": "GV100", "7.5": "TU102", "8.0": "GA100", "8.6": "GA102", "8.9": "AD102",
         "9.0": "GH100", "10.0": "GB100", "12.0": "GB202"}


def summary(tsv_path):
    rows = []
    with open(tsv_path) as tsv:
        for number, line in enumerate(tsv, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3 or fields[1] not in STATUSES or not fields[0]:
                print(f"summary: line {number} is malformed: {line!r}")
                return 1
            if fields[1] != "PASS" and not fields[2]:
                print(f"summary: {fields[0]} is {fields[1]} without a reason")
                return 1
            rows.append(fields)
    width = max([len(r[0]) for r in rows] + [4])
    print(f"{'CHECK':<{width}}  {'RESULT':<7}  DETAIL")
    for name, status, detail in rows:
        print(f"{name:<{width}}  {status:<7}  {detail}")
    counts = {s: sum(1 for r in rows if r[1] == s) for s in STATUSES}
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIPPED']} skipped")
    return 0


def demangle(names):
    """Demangled names through c++filt (binutils) when it is there; the names unchanged if not."""
    try:
        result = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                                text=True, timeout=60)
    except OSError:
        return list(names)
    lines = result.stdout.split("\n")
    return lines[:len(names)] if result.returncode == 0 and len(lines) >= len(names) else list(names)


def base_name(demangled):
    """The function's own name: no return type, namespaces, template arguments or parameters."""
    text = demangled
    while re.search(r"<[^<>]*>", text):
        text = re.sub(r"<[^<>]*>", "", text)
    text = text.split("(", 1)[0].strip()
    return text.split()[-1].split("::")[-1] if text else demangled


def kernel_key(name, grid, block):
    return f"{base_name(name)} grid{tuple(grid)} block{tuple(block)}"


def kernel_flops(db_path):
    """{kernel key: [FLOPs of each counted launch]} from a rank file's kernel_flops.

    A counted launch whose kernel row is missing is keyed by its name alone: CUPTI delivers
    the activity records of kernels profiled in kernel replay without timestamps (H200,
    2026-11-26), and those are not stored, so their launch shape is unknown."""
    with sqlite3.connect(db_path) as db:
        rows = db.execute(
            "SELECT s.value, f.fp64 + f.fp32 + f.fp16, f.tensor, k.grid_x, k.grid_y, k.grid_z, "
            "k.block_x, k.block_y, k.block_z FROM kernel_flops f "
            "JOIN strings s ON s.sid = f.sid AND s.id = f.name_id "
            "LEFT JOIN kernels k ON k.sid = f.sid AND k.correlation_id = f.correlation_id"
        ).fetchall()
    names = demangle([row[0] for row in rows])
    by_key = {}
    for name, (_, cuda_core, tensor, *shape) in zip(names, rows):
        tensor_flops = sum(json.loads(tensor).values()) if tensor else 0.0
        key = base_name(name) if shape[0] is None else kernel_key(name, shape[:3], shape[3:])
        by_key.setdefault(key, []).append(cuda_core + tensor_flops)
    return by_key


def ncu_flops(counters_path, csv_path):
    """{kernel key: [FLOPs of each profiled launch]} from ncu's `--csv --page raw` output."""
    with open(counters_path) as counters_file:
        weights = {m["name"]: m["flops_per_count"] for m in json.load(counters_file)["metrics"]
                   if m.get("flops_per_count", 0) > 0}
    with open(csv_path, errors="replace") as csv_file:
        lines = [line for line in csv_file if line.startswith('"')]  # not ncu's ==PROF== lines
    reader = csv.reader(lines)
    header = next(reader)
    name_at, grid_at, block_at = (header.index(h) for h in ("Kernel Name", "Grid Size",
                                                             "Block Size"))
    columns = {i: weights[h] for i, h in enumerate(header) if h in weights}
    rows = [row for row in reader if len(row) == len(header) and row[0].isdigit()]  # no units row
    names = demangle([row[name_at] for row in rows])
    by_key = {}
    for name, row in zip(names, rows):
        flops = 0.0
        for index, weight in columns.items():
            value = row[index].replace(",", "")
            flops += float(value) * weight if value not in ("", "n/a") else 0.0
        grid = [int(v) for v in re.findall(r"\d+", row[grid_at])]
        block = [int(v) for v in re.findall(r"\d+", row[block_at])]
        by_key.setdefault(kernel_key(name, grid, block), []).append(flops)
    return by_key, sorted(weights)


def ncu_compare(counters_path, csv_path, flopscope_path):
    """Mean FLOPs per launch of each kernel (name and launch shape) that both counted."""
    with open(flopscope_path) as fs_file:
        ours = json.load(fs_file)
    theirs, metrics = ncu_flops(counters_path, csv_path)
    # Our kernels keyed by name alone (no launch shape) meet ncu's launches of that name.
    for key in [k for k in ours if " grid(" not in k and k not in theirs]:
        same_name = [v for k, values in theirs.items() if k.split(" grid(")[0] == key
                     for v in values]
        if same_name:
            theirs[key] = same_name
    common = sorted(set(ours) & set(theirs))
    if not common:
        print(f"no kernel in common: flopscope {sorted(ours)[:4]}, ncu {sorted(theirs)[:4]}")
        return 1
    failures = []
    print(f"{'kernel':<70} {'flopscope':>12} {'ncu':>12} {'error':>8}")
    for key in common:
        mine, reference = statistics.fmean(ours[key]), statistics.fmean(theirs[key])
        error = (mine - reference) / reference if reference else (0.0 if mine == 0 else 1.0)
        print(f"{key[:70]:<70} {mine:>12.4g} {reference:>12.4g} {error:>+8.2%}")
        if abs(error) > TOLERANCE:
            failures.append(key)
    print(f"{len(common)} kernels compared ({len(set(ours) - set(theirs))} only in flopscope, "
          f"{len(set(theirs) - set(ours))} only in ncu) over {len(metrics)} FLOP metrics; "
          f"{len(failures)} off by more than {TOLERANCE:.0%}"
          + (f": {', '.join(f[:40] for f in failures)}" if failures else ""))
    return 1 if failures else 0


def step_ms(db_path):
    with sqlite3.connect(db_path) as db:
        rows = db.execute(
            "SELECT e.end_ns - e.start_ns, e.counted FROM range_events e JOIN range_paths p "
            "ON p.sid = e.sid AND p.id = e.path_id "
            "WHERE p.domain = 'flopscope' AND p.name = 'step'").fetchall()
    return {"counted": [d / 1e6 for d, c in rows if c],
            "uncounted": [d / 1e6 for d, c in rows if not c]}


def overhead(base_path, timing_path, db_path, warmup=5):
    def median_ms(path):
        with open(path) as job:
            return statistics.median(json.load(job)["step_ms"][warmup:])
    base, timed = median_ms(base_path), median_ms(timing_path)
    steps = step_ms(db_path)
    if not steps["counted"] or not steps["uncounted"]:
        print(f"timing-only {100 * (timed - base) / base:+.1f}% per step; no counted step found")
        return 1
    counted, uncounted = statistics.median(steps["counted"]), statistics.median(steps["uncounted"])
    print(f"step without injector {base:.2f} ms, timing-only {timed:.2f} ms "
          f"({100 * (timed - base) / base:+.1f}%), counted step {counted:.1f} ms = "
          f"{counted / uncounted:.1f}x an uncounted one ({uncounted:.2f} ms)")
    return 0


# What the tracer says at its end about GPU activities it lost (KernelTracer::DescribeDrops) and a
# range profiler CUPTI would not disable (CounterCollector): shown beside the post-window count.
TRACER_LINES = ("kernel tracing lost", "counted kernels came without timestamps",
                "the range profiler could not be disabled")


def post_window(db_path, log_path=None):
    """Kernels stored in each uncounted step after the last counted one, by the step their launch's
    range started in: every such step must have some. (H200, 2026-11-26: the ~10 steps after the
    window had none, lost as CUPTI_DROPPED, until the tracer flushed CUPTI forced from the window
    on.) Prints the tracer's own lines."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
        steps = db.execute(
            "SELECT e.start_ns, e.end_ns, e.counted FROM range_events e JOIN range_paths p "
            "ON p.sid = e.sid AND p.id = e.path_id "
            "WHERE p.domain = 'flopscope' AND p.name = 'step' ORDER BY e.start_ns").fetchall()
        launched = sorted(start for (start,) in db.execute(
            "SELECT e.start_ns FROM kernels k JOIN range_events e "
            "ON e.sid = k.sid AND e.instance_id = k.range_instance_id WHERE k.counted = 0"))
    said = []
    if log_path:
        with open(log_path, errors="replace") as log:
            said = [line.strip() for line in log if any(s in line for s in TRACER_LINES)]
    counted = [number for number, step in enumerate(steps) if step[2]]
    after = [(number, step) for number, step in enumerate(steps)
             if counted and number > counted[-1] and not step[2]]
    per_step = [bisect.bisect_right(launched, end) - bisect.bisect_left(launched, start)
                for _, (start, end, _) in after]
    tail = ("; " + " | ".join(said)) if said else ""
    if not counted or not after:
        print(f"{len(steps)} steps, counted {counted}: no uncounted step after a window{tail}")
        return 1
    empty = [after[i][0] for i, kernels in enumerate(per_step) if kernels == 0]
    print(f"{len(after)} steps after the window (step {counted[-1]}): kernels a step "
          f"{min(per_step)}-{max(per_step)} (median {statistics.median(per_step):g})"
          + (f"; none in steps {empty[0]}-{empty[-1]} ({len(empty)})" if empty else "") + tail)
    return 1 if empty else 0


def forward_flops_errors(modules, analytic):
    """[(name, counted, expected)] for the Linear layers the job computed analytic forward FLOPs
    for ("linear1" matches every layer's .../linear1; a full path matches itself): the module's
    counted `fwd_flops` per step (None when the daemon did not split its FLOPs by pass)."""
    found = []
    for module in modules:
        path = module.get("path", "")
        for name, expected in analytic.items():
            if path == name or path.endswith("/" + name):
                found.append((path, module.get("fwd_flops"), float(expected)))
    return found


def torch_report(report_path, job_path=None):
    with open(report_path) as report_file:
        report = json.load(report_file)
    windows = report.get("counter_windows", [])
    flops = sum(float(m.get("flops") or 0) for m in report.get("modules", []))
    statuses = [w.get("status", "") for w in windows if w.get("status", "")]
    line = (f"{len(report.get('modules', []))} modules, {len(windows)} counter windows, "
            f"{flops:.4g} FLOPs counted" + (f"; window status: {statuses[0]}" if statuses else ""))
    ok = bool(windows) and not statuses and flops > 0
    if job_path:
        # The forward FLOPs of each Linear against 2 * tokens * in * out: the pass split (a
        # module's backward kernels run under its range too) and the counters, end to end.
        checked = forward_flops_errors(report.get("modules", []), load(job_path).get(
            "analytic_fwd_flops", {}))
        off = [(path, counted, expected) for path, counted, expected in checked
               if counted is None or abs(counted - expected) > FORWARD_TOLERANCE * expected]
        errors = [(c - e) / e for _, c, e in checked if c is not None]
        worst = max(errors, key=abs) if errors else None
        line += (f"; {len(checked)} Linear forward FLOPs against analytic"
                 + (f", worst {worst:+.1%}" if worst is not None else "")
                 if checked else "; no Linear module to check against analytic FLOPs")
        if off:
            path, counted, expected = off[0]
            line += f"; {len(off)} off by more than {FORWARD_TOLERANCE:.0%}: {path} {counted} " \
                    f"against {expected:.4g}"
        ok = ok and bool(checked) and not off
    print(line)
    return 0 if ok else 1


def load(path):
    with open(path) as document:
        return json.load(document)


def modules_report(report_path, steps):
    report = load(report_path)
    modules = report.get("modules", [])
    calls = sum(int(m.get("calls") or 0) for m in modules)
    print(f"{len(modules)} modules, {calls} calls, {len(report.get('ranks', []))} rank(s)")
    return 0 if modules and calls >= int(steps) and report.get("ranks") else 1


def counters_plan(counters_path):
    plan = load(counters_path)
    flop_metrics = [m for m in plan.get("metrics", []) if m.get("flops_per_count", 0) > 0]
    print(f"chip {plan.get('chip')}: {len(plan.get('metrics', []))} metrics "
          f"({len(flop_metrics)} of FLOPs), {plan.get('passes')} passes, "
          f"libcupti {plan.get('cupti', {}).get('path')}")
    return 0 if flop_metrics and plan.get("passes") else 1


def flop_metrics(counters_path):
    print(",".join(m["name"] for m in load(counters_path)["metrics"]
                   if m.get("flops_per_count", 0) > 0))
    return 0


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "summary":
        return summary(*args)
    if command == "chip":
        print(CHIPS.get(args[0], ""))
        return 0 if args[0] in CHIPS else 1
    if command == "flopscope-kernels":
        print(json.dumps(kernel_flops(*args)))
        return 0
    if command == "ncu-compare":
        return ncu_compare(*args)
    if command == "step-ms":
        print(json.dumps(step_ms(*args)))
        return 0
    if command == "overhead":
        return overhead(*args)
    if command == "post-window":
        return post_window(*args)
    if command == "torch-report":
        return torch_report(*args)
    if command == "modules-report":
        return modules_report(*args)
    if command == "counters-plan":
        return counters_plan(*args)
    if command == "flop-metrics":
        return flop_metrics(*args)
    print(f"acceptance_checks: unknown command {command}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
