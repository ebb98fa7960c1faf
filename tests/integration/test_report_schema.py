"""The report as a user reads it, against the real daemon: the JSON validates against
docs/report.schema.json; step 0 is left out as warm-up unless --steps says otherwise; iter latency
is fwd + bwd + step; a module's latency is its forward ranges only; the text says why there are no
GPU figures; a report over fewer ranks than the world size says so."""

import json
from pathlib import Path

from harness import DaemonTestCase, client, rank_env, run_job, tool

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "report.schema.json"
STEPS, LAYERS = 4, 1


class ReportSchemaTest(DaemonTestCase):

    def run_lm(self, job, env=None):
        result = run_job(self.daemon.socket, job, [tool("transformer_nvtx"), "--steps", str(STEPS),
                                                   "--layers", str(LAYERS)], env=env)
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

    def test_fewer_ranks_than_the_world_size_are_said(self):
        self.daemon.start()
        world_size = 8
        self.run_lm("half", env=rank_env(0, world_size))
        text = self.report("half")
        expected = "1 of %d ranks reported" % world_size
        self.assertTrue(text.startswith("flopscope: warning: " + expected), text[:200])
        profile = json.loads(self.report("half", "--format", "json"))["profile"]
        self.assertTrue(profile["partial"].startswith(expected), profile["partial"])

    def test_a_reused_job_id_is_said_to_merge_two_runs(self):
        self.daemon.start()
        self.run_lm("dup")
        self.run_lm("dup")
        text = self.report("dup")
        self.assertTrue(text.startswith("flopscope: warning: rank 0 has 2 sessions"), text[:300])
        self.assertIn("own --job", text.splitlines()[0])
