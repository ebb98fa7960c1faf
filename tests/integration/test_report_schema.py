"""The report as a user reads it, against the real daemon: the JSON validates against
docs/report.schema.json; step 0 is left out as warm-up unless --steps says otherwise; iter latency
is fwd + bwd + step; a module's latency is its forward ranges only; the text says why there are no
GPU figures; a report over fewer ranks than the world size says so; a second run under a job id is
kept apart; `diff` takes the report's steps; the demo's model shows its own estimated FLOPs."""

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from harness import DaemonTestCase, client, rank_env, run_job, tool

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "report.schema.json"
STEPS, LAYERS = 4, 1
DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo.sh"


def demo_model():
    """The transformer_nvtx flags `make demo` runs with (scripts/demo.sh's MODEL_FLAGS line)."""
    line = re.search(r"^readonly MODEL_FLAGS=\((.*)\)$", DEMO.read_text(), re.M).group(1)
    words = shlex.split(line)
    return words, {flag[2:]: int(value) for flag, value in zip(words[::2], words[1::2])}


def forward_macs(model, layers):
    """transformer_nvtx's forward MACs per module (transformer_model.h), unscaled."""
    t, h, s, v = model["batch"] * model["seq"], model["hidden"], model["seq"], model["vocab"]
    attention, mlp, head = t * (4 * h * h + 2 * s * h), 8 * t * h * h, t * h * v
    macs = {"TransformerLM": layers * (attention + mlp) + head, "TransformerLM/embedding": 0,
            "TransformerLM/head": head}
    for i in range(layers):
        macs[f"TransformerLM/layers.{i}"] = attention + mlp
        macs[f"TransformerLM/layers.{i}/self_attn"] = attention
        macs[f"TransformerLM/layers.{i}/mlp"] = mlp
    return macs


def deepspeed_number(value, suffix):
    """DeepSpeed's number_to_string with automatic units: round(value / unit, 2) as {:g}."""
    for magnitude, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if value >= magnitude:
            return f"{round(value / magnitude, 2):g} {unit}{suffix}"
    return f"{round(value, 2):g} {suffix}"
TIMESTAMP_KEYS = {"start_ns", "end_ns"}  # points on the clock; every duration is in seconds


def duration_keys_not_in_seconds(value, where="$"):
    """Keys in nanoseconds that are not timestamps: one unit per kind (schema 3)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("_ns") and key not in TIMESTAMP_KEYS:
                found.append(where + "." + key)
            found += duration_keys_not_in_seconds(item, where + "." + key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += duration_keys_not_in_seconds(item, "%s[%d]" % (where, index))
    return found


class ReportSchemaTest(DaemonTestCase):

    def lm_command(self):
        return [tool("transformer_nvtx"), "--steps", str(STEPS), "--layers", str(LAYERS)]

    def run_lm(self, job, env=None, run_args=()):
        result = run_job(self.daemon.socket, job, self.lm_command(), env=env, run_args=run_args)
        self.assertEqual(result.returncode, 0, result.stderr)

    def report(self, job, *args):
        result = client(["report", job, "--socket", str(self.daemon.socket), *args])
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_json_validates_and_follows_deepspeed_semantics(self):
        try:
            import jsonschema
        except ImportError:
            self.skipTest("python3-jsonschema is not installed (scripts/setup_deps.sh test set)")
        self.daemon.start()
        self.run_lm("lm")
        schema = json.loads(SCHEMA.read_text())
        for args in ([], ["--steps", "0:"], ["--steps", "2"], ["--rank", "0"]):
            report = json.loads(self.report("lm", "--format", "json", *args))
            jsonschema.validate(report, schema)
            self.assertEqual(report["schema_version"], schema["properties"]["schema_version"]["const"])
            self.assertEqual(duration_keys_not_in_seconds(report), [])
        report = json.loads(self.report("lm", "--format", "json"))
        profile = report["profile"]
        # Default: step 0 is warm-up, left out.
        self.assertEqual(profile["step_window"]["first"], 1)
        self.assertEqual(profile["step_window"]["last"], STEPS - 1)
        self.assertIn("warm-up", profile["steps_note"])
        summary = profile["summary"]
        parts = [summary[k]["value"] for k in ("fwd_latency_s", "bwd_latency_s", "step_latency_s")]
        self.assertAlmostEqual(summary["iter_latency_s"]["value"], sum(parts), places=12)
        self.assertIsNotNone(summary["measured_step_range_s"]["value"])
        # The model root first; its latency is its forward ranges, within the forward phase.
        root = profile["modules"][0]
        self.assertEqual(root["depth"], 0)
        self.assertLessEqual(root["latency_s"], summary["fwd_latency_s"]["value"])
        self.assertIsNotNone(root["bwd_latency_s"])
        self.assertGreater(root["all_passes_latency_s"], root["latency_s"])
        # No GPU here: every rank says why, and the profile repeats it.
        self.assertTrue(report["ranks"][0]["gpu_status"])
        self.assertIn(report["ranks"][0]["gpu_status"], profile["no_gpu_why"])
        self.assertIsNone(profile["partial"])

    def test_text_keeps_deepspeeds_layout_and_says_why(self):
        self.daemon.start()
        self.run_lm("lm")
        text = self.report("lm")
        self.assertTrue(text.startswith("\n-------------------------- DeepSpeed Flops Profiler"),
                        text[:200])
        rule = "\n" + "-" * 78 + "\n"
        self.assertIn(rule, text)
        deepspeed, additions = text.split(rule, 1)
        self.assertIn("Profile Summary at steps 1-%d" % (STEPS - 1), deepspeed)
        self.assertIn("FLOPS per GPU = 3 * fwd flops per GPU / iter latency:", deepspeed)
        self.assertNotIn("MFU", deepspeed)
        self.assertIn("step 0 left out as warm-up", additions)
        status = json.loads(self.report("lm", "--format", "json"))["ranks"][0]["gpu_status"]
        self.assertIn("-  (" + status + ")", additions)  # the device line says why
        whole = self.report("lm", "--steps", "0:")
        self.assertIn("Profile Summary at steps 0-%d" % (STEPS - 1), whole)

    def test_the_demo_model_shows_its_own_estimated_flops(self):
        self.daemon.start()
        flags, model = demo_model()
        world, layers = 2, 2
        for rank in range(world):
            result = run_job(self.daemon.socket, "demo", [tool("transformer_nvtx"), "--steps",
                                                          str(STEPS), "--layers", str(layers),
                                                          *flags], env=rank_env(rank, world))
            self.assertEqual(result.returncode, 0, result.stderr)
        profile = json.loads(self.report("demo", "--format", "json"))["profile"]
        expected = forward_macs(model, layers)
        rows = {row["path"]: row for row in profile["modules"]}
        for path, macs in expected.items():
            self.assertEqual((rows[path]["macs"], rows[path]["flops"]), (macs, 2 * macs), path)
            self.assertEqual(rows[path]["flops_source"], "estimated", path)
        summary = profile["summary"]
        self.assertEqual(summary["fwd_macs_per_gpu"]["value"], expected["TransformerLM"])
        self.assertEqual(summary["fwd_flops_per_gpu"]["value"], 2 * expected["TransformerLM"])
        self.assertAlmostEqual(summary["fwd_flops_per_s"]["value"],
                               2 * expected["TransformerLM"] / summary["fwd_latency_s"]["value"])
        # DeepSpeed: batch size per GPU x world size over the iter latency.
        self.assertEqual(profile["batch_size"], model["batch"])
        self.assertAlmostEqual(summary["samples_per_s"]["value"],
                               model["batch"] * world / summary["iter_latency_s"]["value"])
        self.assertIn("estimated", profile["flops_source"])

    def test_make_demo_prints_estimated_flops_in_deepspeeds_lines(self):
        build = Path(os.environ.get("FLOPSCOPE_BUILD_DIR", Path(__file__).resolve().parents[2]
                                    / "build"))
        result = subprocess.run([str(DEMO), str(build)], capture_output=True, text=True,
                                timeout=120, env=dict(os.environ, DEMO_STEPS="3"))
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        _, model = demo_model()
        macs = forward_macs(model, 2)["TransformerLM"]  # demo.sh's default of 2 layers
        text = result.stdout
        for label, value in (("fwd MACs per GPU:", deepspeed_number(macs, "MACs")),
                             ("fwd flops per GPU:", deepspeed_number(2 * macs, ""))):
            line = next((l for l in text.splitlines() if l.startswith(label)), "")
            # The figure, then where it comes from (issue 32: an estimate says so).
            figure, _, source = line.split(None, len(label.split()))[-1].partition("  (")
            self.assertEqual(figure.strip(), value.strip(), line)
            self.assertEqual(source, "estimated)", line)
        self.assertRegex(text, r"\nsamples/second: +[0-9.]+ *\n")
        self.assertRegex(text, r"\nflops: +estimated from shapes")
        # The model as print(model) has it, from the example's module / class marks.
        heads = [line.strip() for line in text.splitlines() if line.rstrip().endswith("(")]
        self.assertEqual(heads[:3], ["TransformerLM(", "(layers): ModuleList(",
                                     "(0): TransformerBlock("], heads)

    def test_diff_takes_the_reports_steps_and_statistic(self):
        self.daemon.start()
        self.run_lm("before")
        self.run_lm("after")

        def diff(*args):
            result = client(["diff", "before", "after", "--socket", str(self.daemon.socket),
                             "--format", "json", *args])
            self.assertEqual(result.returncode, 0, result.stderr)
            return json.loads(result.stdout)

        for steps in ([], ["--steps", "2"], ["--steps", "0:"]):
            compared = diff(*steps)
            for side, job in (("a", "before"), ("b", "after")):
                profile = json.loads(self.report(job, "--format", "json", *steps))["profile"]
                window = profile["step_window"]
                self.assertEqual((compared["steps"][side]["first"], compared["steps"][side]["last"]),
                                 (window["first"], window["last"]), steps)
                latency = {row["path"]: row["latency_s"] for row in profile["modules"]}
                for row in compared["modules"]:
                    if row["path"] in latency:
                        self.assertEqual(row["latency_s_" + side], latency[row["path"]],
                                         (steps, row["path"]))
        self.assertEqual(diff()["steps"]["a"]["first"], 1)  # warm-up left out by default
        bad = client(["diff", "before", "after", "--socket", str(self.daemon.socket), "--steps",
                      "2-3"])
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("A:B", bad.stderr)

    def test_fewer_ranks_than_the_world_size_are_said(self):
        self.daemon.start()
        world_size = 8
        self.run_lm("half", env=rank_env(0, world_size))
        text = self.report("half")
        expected = "1 of %d ranks reported" % world_size
        self.assertTrue(text.startswith("flopscope: warning: " + expected), text[:200])
        profile = json.loads(self.report("half", "--format", "json"))["profile"]
        self.assertTrue(profile["partial"].startswith(expected), profile["partial"])

    def test_a_reused_job_id_keeps_the_runs_apart(self):
        self.daemon.start()
        self.run_lm("dup")
        second = run_job(self.daemon.socket, "dup", self.lm_command())
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("this run is job dup.run2", second.stderr)
        jobs = json.loads(client(["jobs", "--socket", str(self.daemon.socket), "--format",
                                  "json"]).stdout)
        self.assertEqual(sorted(j["job"] for j in jobs["jobs"]), ["dup", "dup.run2"])
        for job in ("dup", "dup.run2"):
            profile = json.loads(self.report(job, "--format", "json"))["profile"]
            self.assertIsNone(profile["merged_sessions"], job)
            self.assertFalse(self.report(job).startswith("flopscope: warning:"), job)
        # --append records into the id as given: the merge is then said, with the fix.
        self.run_lm("dup", run_args=["--append"])
        text = self.report("dup")
        self.assertTrue(text.startswith("flopscope: warning: rank 0 has 2 sessions"), text[:300])
        self.assertIn("own --job", text.splitlines()[0])

    def test_ranks_of_one_run_that_start_apart_stay_one_job(self):
        self.daemon.start()
        for rank in range(2):  # rank 1 starts after rank 0 has finished
            self.run_lm("apart", env=rank_env(rank, 2))
        jobs = json.loads(client(["jobs", "--socket", str(self.daemon.socket), "--format",
                                  "json"]).stdout)
        self.assertEqual([j["job"] for j in jobs["jobs"]], ["apart"])
        report = json.loads(self.report("apart", "--format", "json"))
        self.assertEqual(sorted(r["rank"] for r in report["ranks"]), [0, 1])
        self.assertIsNone(report["profile"]["merged_sessions"])
