"""`flopscope export` end to end: a real job and an imported real trace exported as Perfetto
protobuf and Chrome JSON, parsed back (the protobuf with classes protoc generated from
proto/perfetto/trace.proto, the JSON with Python's json) and compared with the rank files
themselves (sqlite3): every range and GPU activity exactly once, each range nested under its
parent, each activity on its stream with a flow from the range that launched it, names interned."""

import json
import os
import sqlite3
import unittest
from collections import defaultdict
from pathlib import Path

from harness import DaemonTestCase, client, run_job, tool

try:
    from perfetto import trace_pb2  # generated at build time into tests/py (PYTHONPATH)
except ImportError:  # pragma: no cover - the build generates it
    trace_pb2 = None

DATA = Path(os.environ.get("FLOPSCOPE_SHARED_DATA_DIR",
                           Path(__file__).resolve().parents[3] / "shared" / "data"))
QWEN = DATA / "TraceLens" / "tests" / "traces" / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
# B200 decode: kernels of one stream overlap (programmatic dependent launch), so the export puts
# them on lanes beside the stream's track.
EAGER = DATA / "TraceLens" / "tests" / "traces" / "b200" / "eager_trace.json.gz"


def rank_truth(rank_file):
    """Ranges and activities of one single-session rank file, as stored."""
    db = sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True)
    paths = {pid: (parent, domain, name) for pid, parent, domain, name in
             db.execute("SELECT id, parent_id, domain, name FROM range_paths")}
    ranges = {row[0]: row[1:] for row in db.execute(
        "SELECT instance_id, path_id, parent_instance_id, thread_id, start_ns, end_ns, kind "
        "FROM range_events")}
    kernels = {row[0]: row[1:] for row in db.execute(
        "SELECT rowid, range_instance_id, start_ns, end_ns, device_id, stream_id FROM kernels")}
    sessions = db.execute("SELECT count(*) FROM sessions").fetchone()[0]
    db.close()
    return paths, ranges, kernels, sessions


def full_path(paths, path_id):
    names = []
    while path_id:
        parent, _, name = paths[path_id]
        names.append(name)
        path_id = parent
    return "/".join(reversed(names))


def perfetto_slices(data):
    """(tracks, slices, counters): slices rebuilt from begin/end events sorted by time (ties in
    file order, as trace processors sort), each with the slice open on its track as parent."""
    trace = trace_pb2.Trace()
    trace.ParseFromString(data)
    names, arg_names, tracks, events = {}, {}, {}, []
    for index, packet in enumerate(trace.packet):
        for name in packet.interned_data.event_names:
            assert name.iid not in names, f"event name iid {name.iid} defined twice"
            names[name.iid] = name.name
        for name in packet.interned_data.debug_annotation_names:
            assert name.iid not in arg_names
            arg_names[name.iid] = name.name
        if packet.HasField("track_descriptor"):
            tracks[packet.track_descriptor.uuid] = packet.track_descriptor
        if packet.HasField("track_event"):
            events.append((packet.timestamp, index, packet.track_event))
    events.sort(key=lambda e: (e[0], e[1]))
    slices, counters, stacks = [], defaultdict(list), defaultdict(list)
    for ts, _, event in events:
        stack = stacks[event.track_uuid]
        if event.type == trace_pb2.TrackEvent.TYPE_COUNTER:
            counters[event.track_uuid].append((ts, event.counter_value or
                                               event.double_counter_value))
        elif event.type == trace_pb2.TrackEvent.TYPE_SLICE_BEGIN:
            assert not event.HasField("name"), "a name not interned"
            args = {}
            for arg in event.debug_annotations:
                kind = arg.WhichOneof("value")
                args[arg_names[arg.name_iid]] = getattr(arg, kind)
            slices.append({"track": event.track_uuid, "start": ts, "name": names[event.name_iid],
                           "args": args, "flows": list(event.flow_ids),
                           "parent": stack[-1] if stack else None})
            stack.append(len(slices) - 1)
        elif event.type == trace_pb2.TrackEvent.TYPE_SLICE_END:
            assert stack, "an end with no open slice"
            slices[stack.pop()]["end"] = ts
    assert all(not s for s in stacks.values()), "unclosed slices"
    return tracks, slices, counters


def chrome_slices(data):
    """X events with ns times and their parent from nesting on each (pid, tid), and flows."""
    doc = json.loads(data)
    base = doc.get("baseTimeNanoseconds", 0)
    events = doc["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    for e in xs:
        e["start"] = base + round(e["ts"] * 1000)
        e["end"] = e["start"] + round(e["dur"] * 1000)
    by_thread = defaultdict(list)
    for index, e in enumerate(xs):
        by_thread[(e["pid"], e["tid"])].append(index)
    for indices in by_thread.values():
        indices.sort(key=lambda i: (xs[i]["start"], -xs[i]["end"], i))
        stack = []
        for i in indices:
            while stack and xs[stack[-1]]["end"] < xs[i]["end"]:
                stack.pop()
            xs[i]["parent"] = stack[-1] if stack else None
            stack.append(i)
    flows = {"s": {}, "f": {}}
    for e in events:
        if e["ph"] in flows:
            assert e["id"] not in flows[e["ph"]], f"flow {e['ph']} {e['id']} twice"
            flows[e["ph"]][e["id"]] = e
    return doc, xs, flows


@unittest.skipIf(trace_pb2 is None, "perfetto/trace_pb2.py not generated (build tests/py)")
class ExportTest(DaemonTestCase):

    def export(self, job, fmt, *extra):
        out = self.root / f"{job}.{fmt}"
        result = client(["export", job, "--format", fmt, "-o", str(out), "--socket",
                         str(self.daemon.socket), *extra], timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(str(out), result.stdout)
        return out.read_bytes()

    def check_perfetto(self, data, paths, ranges, kernels):
        tracks, slices, _ = perfetto_slices(data)
        by_instance = {}
        for index, s in enumerate(slices):
            if "instance" in s["args"]:
                self.assertNotIn(s["args"]["instance"], by_instance, "a range twice")
                by_instance[s["args"]["instance"]] = index
        self.assertEqual(set(by_instance), set(ranges))
        for instance, (path_id, parent, tid, start, end, _) in ranges.items():
            s = slices[by_instance[instance]]
            self.assertEqual((s["start"], s["end"]), (start, end))
            self.assertEqual(s["name"], paths[path_id][2])
            self.assertEqual(s["args"]["path"], full_path(paths, path_id))
            got = None if s["parent"] is None else slices[s["parent"]]["args"]["instance"]
            self.assertEqual(got or 0, parent, f"parent of {s['args']['path']}")
        by_key = {s["args"]["key"]: s for s in slices if "key" in s["args"]}
        self.assertEqual(len(by_key), sum(1 for s in slices if "key" in s["args"]))
        self.assertEqual(set(by_key), set(kernels))
        flow_source = {f: slices[i]["args"]["instance"]
                       for i in by_instance.values() for f in slices[i]["flows"]}
        for key, (instance, start, end, device, stream) in kernels.items():
            s = by_key[key]
            self.assertEqual((s["start"], s["end"]), (start, end))
            # Kernels that overlap on a stream go to lanes beside it ("... (overlap N)").
            self.assertTrue(tracks[s["track"]].name.startswith(f"GPU {device} stream {stream}"))
            if instance in ranges:
                self.assertEqual(len(s["flows"]), 1)
                self.assertEqual(flow_source[s["flows"][0]], instance)
            else:
                self.assertEqual(s["flows"], [])
        return tracks, slices

    def check_chrome(self, data, paths, ranges, kernels):
        doc, xs, flows = chrome_slices(data)
        by_instance = {e["args"]["instance"]: e for e in xs if "instance" in e["args"]}
        self.assertEqual(len(by_instance), sum(1 for e in xs if "instance" in e["args"]))
        self.assertEqual(set(by_instance), set(ranges))
        for instance, (path_id, parent, _, start, end, _) in ranges.items():
            e = by_instance[instance]
            self.assertEqual((e["start"], e["end"]), (start, end))
            self.assertEqual(e["args"]["path"], full_path(paths, path_id))
            got = None if e["parent"] is None else xs[e["parent"]]["args"]["instance"]
            self.assertEqual(got or 0, parent, f"parent of {e['args']['path']}")
        by_key = {e["args"]["key"]: e for e in xs if "key" in e["args"]}
        self.assertEqual(set(by_key), set(kernels))
        for flow_id, finish in flows["f"].items():
            start = flows["s"][flow_id]
            kernel = [e for e in xs if "key" in e["args"] and e["tid"] == finish["tid"]
                      and e["ts"] == finish["ts"]]
            self.assertTrue(kernel)
            self.assertTrue(any(by_instance[kernels[k["args"]["key"]][0]]["ts"] == start["ts"]
                                for k in kernel))
        launched = sum(1 for instance, *_ in kernels.values() if instance in ranges)
        self.assertEqual(len(flows["f"]), launched)
        self.assertEqual(len(flows["s"]), launched)
        names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "thread_name"}
        for e in xs:
            self.assertIn((e["pid"], e["tid"]), names)

    def test_job_exports_every_range_once_with_its_parent(self):
        self.daemon.start()
        result = run_job(self.daemon.socket, "lm", [tool("transformer_nvtx"), "--steps", "3",
                                                    "--layers", "2"])
        self.assertEqual(result.returncode, 0, result.stderr)
        paths, ranges, kernels, sessions = rank_truth(self.daemon.rank_file("lm", 0))
        self.assertEqual(sessions, 1)
        self.assertGreater(len(ranges), 10)
        tracks, slices = self.check_perfetto(self.export("lm", "perfetto"), paths, ranges, kernels)
        processes = [t for t in tracks.values() if t.HasField("process")]
        self.assertEqual([p.process.pid for p in processes], [1])
        steps = [r for r in ranges.values() if paths[r[0]][1:] == ("flopscope", "step")]
        _, _, counters = perfetto_slices(self.export("lm", "perfetto"))
        step_track = [u for u, t in tracks.items() if t.name == "step time"]
        self.assertEqual(sorted(counters[step_track[0]]),
                         sorted((start, end - start) for _, _, _, start, end, _ in steps))
        self.check_chrome(self.export("lm", "chrome"), paths, ranges, kernels)

    def test_step_window_keeps_what_overlaps_those_steps(self):
        self.daemon.start()
        result = run_job(self.daemon.socket, "win", [tool("transformer_nvtx"), "--steps", "4",
                                                     "--layers", "1"])
        self.assertEqual(result.returncode, 0, result.stderr)
        paths, ranges, kernels, _ = rank_truth(self.daemon.rank_file("win", 0))
        steps = sorted((r[3], r[4]) for r in ranges.values()
                       if paths[r[0]][1:] == ("flopscope", "step"))
        first, last = steps[1][0], steps[2][1]
        inside = {i: r for i, r in ranges.items() if r[3] <= last and r[4] >= first}
        self.assertLess(len(inside), len(ranges))
        _, slices, _ = perfetto_slices(self.export("win", "perfetto", "--steps", "1:2"))
        self.assertEqual(sorted(s["args"]["instance"] for s in slices), sorted(inside))
        bad = client(["export", "win", "--steps", "9:", "-o", str(self.root / "x"),
                      "--socket", str(self.daemon.socket)])
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("no step in the window", bad.stderr)
        self.assertFalse((self.root / "x").exists())

    @unittest.skipUnless(QWEN.exists() and EAGER.exists(), f"shared data not found under {DATA}")
    def test_imported_traces_with_kernels_and_flows(self):
        self.daemon.start()
        for job, trace in (("qwen", QWEN), ("eager", EAGER)):
            result = client(["import", str(trace), "--job", job, "--socket",
                             str(self.daemon.socket)], timeout=120)
            self.assertEqual(result.returncode, 0, result.stderr)
            rank_file = next((self.daemon.data_dir / "jobs" / job).glob("rank-*.sqlite"))
            paths, ranges, kernels, sessions = rank_truth(rank_file)
            self.assertEqual(sessions, 1)
            self.assertGreater(len(kernels), 500)
            self.assertTrue(any(instance in ranges for instance, *_ in kernels.values()))
            tracks, _ = self.check_perfetto(self.export(job, "perfetto"), paths, ranges, kernels)
            self.check_chrome(self.export(job, "chrome"), paths, ranges, kernels)
            if job == "eager":
                self.assertTrue(any("(overlap 1)" in t.name for t in tracks.values()))

    def test_unknown_job_says_so(self):
        self.daemon.start()
        result = client(["export", "nope", "-o", str(self.root / "t"), "--socket",
                         str(self.daemon.socket)])
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("job 'nope' not found", result.stderr)


if __name__ == "__main__":
    unittest.main()
