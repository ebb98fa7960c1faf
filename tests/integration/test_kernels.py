"""Kernels end to end without a GPU: GPU activities sent the way the injector sends them are stored
per rank and reported per module (kernels, GPU time, span, busy time, memcpy and memset apart,
devices, the tracing status) and `flopscope report --kernels` lists a module's top kernels,
demangled. And the injector loaded into a CUDA program on a machine with no driver changes
nothing in its output or exit code, and the report says why there are no kernels."""

import subprocess
import time

from flopscope.v1 import records_pb2
from harness import DaemonTestCase, client, report, run_job, TEST_BIN_DIR
from test_bad_batch import Producer, hello

KERNEL, MEMCPY, MEMSET = (records_pb2.ACTIVITY_KIND_KERNEL, records_pb2.ACTIVITY_KIND_MEMCPY,
                          records_pb2.ACTIVITY_KIND_MEMSET)


def gpu_batch(base):
    """Model > attn, mlp: one step's ranges, then the kernels they launched (arriving later)."""
    batch = records_pb2.Batch(seq=1)
    batch.paths.add(id=1, parent_id=0, name="Model")
    batch.paths.add(id=2, parent_id=1, name="attn")
    batch.paths.add(id=3, parent_id=1, name="mlp")
    batch.strings.add(id=1, value="_Z9attentionPfS_i")
    batch.strings.add(id=2, value="_Z4gemmPfS_S_iii")
    for path, instance, parent, start, length in ((2, 11, 10, 0, 100), (3, 12, 10, 200, 100),
                                                  (1, 10, 0, 0, 400)):
        batch.ranges.add(path_id=path, instance_id=instance, parent_instance_id=parent, thread_id=1,
                         start_ns=base + start, end_ns=base + start + length,
                         kind=records_pb2.RANGE_KIND_PUSH_POP)

    def kernel(correlation, path, instance, name, start, length, kind=KERNEL, size=0):
        batch.kernels.add(correlation_id=correlation, path_id=path, range_instance_id=instance,
                          name_id=name, device_id=0, context_id=1, stream_id=7,
                          start_ns=base + start, end_ns=base + start + length, kind=kind,
                          bytes=size)

    kernel(1, 2, 11, 1, 1000, 300)          # attn:  1000..1300
    kernel(2, 3, 12, 2, 1400, 200)          # mlp:   1400..1600
    kernel(3, 3, 12, 2, 1500, 300)          # mlp:   1500..1800, overlapping (another stream)
    kernel(4, 3, 12, 0, 1900, 50, MEMCPY, 1 << 20)
    kernel(5, 0, 0, 0, 2000, 5, MEMSET, 256)  # launched with no module open
    for key, value in (("gpu.status", "tracing kernels with CUPTI 13.0.1"),
                       ("gpu.0.name", "NVIDIA H100 80GB HBM3"), ("gpu.0.chip", "GH100"),
                       ("gpu.0.sm_count", "132"), ("batch_size", "8")):
        batch.metadata.add(key=key, value=value, time_ns=base)
    return batch


class KernelsTest(DaemonTestCase):

    def send_gpu_job(self, job):
        producer = Producer(self.daemon.socket)
        producer.send(hello=hello(f"{job}-session", job=job))
        self.assertEqual(producer.next().WhichOneof("msg"), "welcome")
        producer.send(batch=gpu_batch(int(time.time() * 1e9) - 10_000_000))
        self.assertEqual(producer.next().ack.committed_seq, 1)
        producer.close()

    def test_report_shows_kernels_per_module(self):
        self.daemon.start()
        self.send_gpu_job("gpu")
        rep = report(self.daemon.socket, "gpu")
        modules = {m["path"]: m for m in rep["modules"]}
        attn, mlp, model = modules["Model/attn"], modules["Model/mlp"], modules["Model"]
        ns = lambda seconds: round(seconds * 1e9)  # the JSON's durations are seconds (schema 3)
        self.assertEqual((attn["kernels"], ns(attn["gpu_time_s"]), ns(attn["gpu_span_s"])),
                         (1, 300, 300))
        self.assertEqual(mlp["kernels"], 2)
        self.assertEqual(ns(mlp["gpu_time_s"]), 500)   # durations summed
        self.assertEqual(ns(mlp["gpu_span_s"]), 400)   # first start to last end
        self.assertEqual(ns(mlp["gpu_busy_s"]), 400)   # the overlap counted once
        memcpy = mlp["memcpy"]
        self.assertEqual((memcpy["count"], ns(memcpy["time_s"]), memcpy["bytes"]), (1, 50, 1 << 20))
        self.assertEqual((model["kernels"], ns(model["gpu_span_s"]), ns(model["gpu_busy_s"])),
                         (3, 800, 700))
        self.assertEqual(modules["<unattributed>"]["memset"]["count"], 1)
        self.assertEqual(modules["<unattributed>"]["kernels"], 0)
        rank = rep["ranks"][0]
        self.assertEqual(rank["gpu_status"], "tracing kernels with CUPTI 13.0.1")
        self.assertEqual(rank["devices"][0]["chip"], "GH100")
        self.assertEqual(rank["devices"][0]["sm_count"], 132)

        tree = client(["report", "gpu", "--socket", str(self.daemon.socket), "--format", "tree"])
        self.assertEqual(tree.returncode, 0, tree.stderr)
        self.assertIn("GPU span", tree.stdout)
        self.assertIn("Memory copies and sets", tree.stdout)
        self.assertIn("gpu 0: NVIDIA H100 80GB HBM3 (GH100, 132 SMs)", tree.stdout)

    def test_top_kernels_of_a_module(self):
        self.daemon.start()
        self.send_gpu_job("top")
        text = client(["report", "top", "--socket", str(self.daemon.socket), "--kernels", "Model"])
        self.assertEqual(text.returncode, 0, text.stderr)
        lines = text.stdout.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("kernel"))
        self.assertTrue(lines[first + 2].startswith("gemm(float*, float*, float*, int, int, int)"),
                        text.stdout)
        self.assertTrue(lines[first + 3].startswith("attention(float*, float*, int)"), text.stdout)
        self.assertTrue(lines[first + 4].startswith("[memcpy]"), text.stdout)

        js = client(["report", "top", "--socket", str(self.daemon.socket), "--kernels", "Model/attn",
                     "--format", "json"])
        self.assertEqual(js.returncode, 0, js.stderr)
        import json
        top = json.loads(js.stdout)
        self.assertEqual(top["top_kernels_of"], "Model/attn")
        self.assertEqual([k["name"] for k in top["top_kernels"]], ["_Z9attentionPfS_i"])

        missing = client(["report", "top", "--socket", str(self.daemon.socket), "--kernels", "Nope"])
        self.assertEqual(missing.returncode, 1)
        self.assertIn("has no module 'Nope'", missing.stderr)

    def test_no_driver_changes_nothing_and_says_why(self):
        program = TEST_BIN_DIR / "gpu_kernel_workload"
        if not program.exists():
            self.skipTest("the CUDA test program was not built (no nvcc)")
        alone = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
        if alone.returncode != 77:
            self.skipTest("this machine has a CUDA device: tests/gpu covers it")
        self.daemon.start()
        traced = run_job(self.daemon.socket, "nodriver", [str(program)])
        self.assertEqual(traced.returncode, alone.returncode)
        self.assertEqual(traced.stdout, alone.stdout)
        rep = report(self.daemon.socket, "nodriver")
        self.assertEqual(rep["ranks"][0]["gpu_status"], "no CUDA driver: NVTX ranges only")
        self.assertEqual({m["path"] for m in rep["modules"]}, {"probe"})
