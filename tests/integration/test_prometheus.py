"""flopscoped --metrics scraped by Debian's real Prometheus server: a two-rank job runs, Prometheus
scrapes every second, and the values its HTTP query API returns must equal what `flopscope ranks`
and `flopscope report --format json` say about the same job (nothing typed in). Skips when the
`prometheus` package is not installed (scripts/setup_deps.sh test installs it)."""

import json
import re
import shutil
import socket
import subprocess
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import grpc

from flopscope.v1 import records_pb2
from harness import DaemonTestCase, client, rank_env, report, start_job, tool
from test_bad_batch import Producer

PROMETHEUS = shutil.which("prometheus")
JOB = "prom-job"
COUNTED_JOB = "prom-counted"
MS = 1_000_000
WORLD_SIZE = 2
STEPS = 4

SCRAPE_CONFIG = """\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: flopscoped
    honor_labels: true  # keep flopscope's own `job` label (else it becomes exported_job)
    scrape_timeout: 1s
    static_configs:
      - targets: ["{target}"]
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    """(status, content type, body) of a GET; HTTP errors are answers too."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.headers.get("Content-Type"), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type"), error.read().decode()


@unittest.skipUnless(PROMETHEUS, "prometheus is not installed (scripts/setup_deps.sh test)")
class PrometheusTest(DaemonTestCase):

    def start_prometheus(self, target):
        config = self.root / "prometheus.yml"
        config.write_text(SCRAPE_CONFIG.format(target=target))
        port = free_port()
        self.prom_log = open(self.root / "prometheus.log", "wb")
        self.prometheus = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.root / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=self.prom_log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop_prometheus)
        self.prom_url = f"http://127.0.0.1:{port}"
        self.wait_for(lambda: self.ready(), 30, "prometheus did not become ready")

    def stop_prometheus(self):
        self.prometheus.terminate()
        try:
            self.prometheus.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.prometheus.kill()
            self.prometheus.wait()
        self.prom_log.close()

    def ready(self):
        if self.prometheus.poll() is not None:
            log = (self.root / "prometheus.log").read_text(errors="replace")
            raise AssertionError(f"prometheus exited with {self.prometheus.returncode}:\n{log}")
        try:
            return http_get(self.prom_url + "/-/ready", timeout=1)[0] == 200
        except OSError:
            return False

    def wait_for(self, condition, timeout, message):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.2)
        raise AssertionError(message)

    def query(self, promql):
        """{rank: float} of an instant query over series with a `rank` label (or {None: v})."""
        url = self.prom_url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        status, _, body = http_get(url)
        answer = json.loads(body)
        self.assertEqual((status, answer["status"]), (200, "success"), body)
        return {int(r["metric"]["rank"]) if "rank" in r["metric"] else None: float(r["value"][1])
                for r in answer["data"]["result"]}

    def metrics_address(self):
        found = re.search(r"metrics on http://([0-9.]+:[0-9]+)/metrics", self.daemon.log())
        self.assertIsNotNone(found, self.daemon.log())
        return found.group(1)

    def run_job(self):
        jobs = [start_job(self.daemon.socket, JOB, [tool("transformer_nvtx"), "--steps", str(STEPS),
                                                    "--layers", "1", "--hidden", "64"],
                          env=rank_env(rank, WORLD_SIZE)) for rank in range(WORLD_SIZE)]
        for rank, process in enumerate(jobs):
            _, err = process.communicate(timeout=120)
            self.assertEqual(process.returncode, 0, f"rank {rank}: {err}")

    def test_prometheus_sees_what_the_reports_say(self):
        self.daemon.start(extra_args=["--metrics", "127.0.0.1:0"])
        address = self.metrics_address()
        status, content_type, body = http_get(f"http://{address}/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(content_type, "text/plain; version=0.0.4; charset=utf-8")
        self.assertIn("# TYPE flopscope_rank_step_seconds gauge", body)
        self.assertEqual(http_get(f"http://{address}/other")[0], 404)

        self.start_prometheus(address)
        self.run_job()
        ranks = json.loads(client(["ranks", JOB, "--socket", str(self.daemon.socket),
                                   "--format", "json"]).stdout)["ranks"]
        self.assertEqual(len(ranks), WORLD_SIZE)
        ranges = {r["rank"]: float(r["ranges"]) for r in ranks}
        # Prometheus has scraped the finished job once every rank's ranges are there and no
        # stream is open any more.
        selector = f'job="{JOB}"'
        self.wait_for(
            lambda: (self.query(f'flopscope_rank_records_ingested_total{{{selector},kind="range"}}')
                     == ranges and set(self.query(f"flopscope_rank_connected{{{selector}}}")
                                       .values()) == {0.0}),
            30, "prometheus never saw the finished job:\n" + http_get(f"http://{address}/metrics")[2])

        self.assertEqual(self.query('up{job="flopscoped"}'), {None: 1.0})
        self.assertEqual(
            self.query(f'flopscope_rank_records_ingested_total{{{selector},kind="activity"}}'),
            {r["rank"]: float(r["kernels"]) for r in ranks})
        self.assertEqual(self.query(f"sum by (rank) (flopscope_rank_records_lost_total{{{selector}}})"),
                         {r["rank"]: float(r["lost"]) for r in ranks})
        hosts = self.query_labels(f"flopscope_rank_steps_total{{{selector}}}", "hostname")
        self.assertEqual(hosts, {r["rank"]: r["host"] for r in ranks})

        steps = self.query(f"flopscope_rank_steps_total{{{selector}}}")
        step_seconds = self.query(f"flopscope_rank_step_seconds{{{selector}}}")
        for rank in range(WORLD_SIZE):
            every_step = self.step_phase(report(self.daemon.socket, JOB, rank=rank, steps="0:"))
            self.assertEqual(steps[rank], every_step["calls"])
            last = int(every_step["calls"]) - 1
            latest = self.step_phase(report(self.daemon.socket, JOB, rank=rank,
                                            steps=f"{last}:{last}"))
            self.assertAlmostEqual(step_seconds[rank], latest["median_s"], delta=1e-9)
        # FLOPs here are hardware-counted only (the report may also show FLOPS from FLOPs the
        # program announced, which the live metrics leave out). Without a GPU no counter window
        # runs: no counted kernel, so no FLOPs, FLOPS or MFU series.
        whole = report(self.daemon.socket, JOB, steps="0:")
        counted = {m["path"]: m["counted_kernels"] for m in whole["modules"] if "/" not in m["path"]}
        self.assertEqual(
            sum(self.query(f'flopscope_rank_records_ingested_total{{{selector},kind="kernel_flops"}}')
                .values()), sum(counted.values()))
        if sum(counted.values()) == 0:
            for name in ("step_flops", "achieved_flops_per_second", "mfu_ratio"):
                self.assertEqual(self.query(f"flopscope_rank_{name}{{{selector}}}"), {}, name)

    def send_counted_job(self):
        """A producer speaking the protocol itself: three steps, the second counted with FLOPs of
        two precisions on a known GPU and some losses; then a batch the daemon rejects."""
        now = int(time.time() * 1e9) - 10_000 * MS
        producer = Producer(self.daemon.socket)
        producer.send(hello=records_pb2.SessionHello(
            protocol_version=1, session_id="counted-1", job_id=COUNTED_JOB, rank=0, world_size=1,
            host="testhost", pid=1, start_time_ns=now,
            devices=[records_pb2.Device(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-1")]))
        producer.next()  # Welcome
        batch = records_pb2.Batch(seq=1)
        batch.paths.add(id=1, parent_id=0, name="step", domain="flopscope")
        batch.paths.add(id=2, parent_id=0, name="model")
        steps = [(0, 10 * MS, False), (10 * MS, 50 * MS, True), (60 * MS, 8 * MS, False)]
        for i, (start, length, counted) in enumerate(steps):
            batch.ranges.add(path_id=1, instance_id=2 * i + 1, thread_id=1, start_ns=now + start,
                             end_ns=now + start + length, counted=counted,
                             kind=records_pb2.RANGE_KIND_PUSH_POP)
            batch.ranges.add(path_id=2, instance_id=2 * i + 2, thread_id=1,
                             start_ns=now + start + 1, end_ns=now + start + length - 1,
                             counted=counted, kind=records_pb2.RANGE_KIND_PUSH_POP)
        for correlation in (1, 2):
            flops = batch.kernel_flops.add(correlation_id=correlation, path_id=2,
                                           range_instance_id=4, phase_path_id=1, counted_step=1)
            flops.flops.fp32 = 3e9
            flops.flops.tensor.add(source="bf16_dst_fp32", flops=4e11)
        batch.losses.add(cause=records_pb2.LOSS_CAUSE_BUFFER_FULL, records=7)
        producer.send(batch=batch)
        producer.next()  # Ack
        bad = records_pb2.Batch(seq=2)
        bad.ranges.add(path_id=99, instance_id=99, thread_id=1, start_ns=now, end_ns=now + 1,
                       kind=records_pb2.RANGE_KIND_PUSH_POP)
        producer.send(batch=bad)
        with self.assertRaises(grpc.RpcError):
            producer.next()
        producer.close()

    def test_counted_flops_losses_and_rejections(self):
        self.daemon.start(extra_args=["--metrics", "127.0.0.1:0"])
        self.start_prometheus(self.metrics_address())
        self.send_counted_job()
        jobs = json.loads(client(["jobs", "--socket", str(self.daemon.socket), "--format",
                                  "json"]).stdout)["jobs"]
        job = next(j for j in jobs if j["job"] == COUNTED_JOB)
        selector = f'job="{COUNTED_JOB}"'
        rejected = f"sum(flopscope_rank_records_rejected_total{{{selector}}})"
        self.wait_for(lambda: self.query(rejected) == {None: float(job["rejected_records"])}, 30,
                      "prometheus never saw the rejection")
        ranks = json.loads(client(["ranks", COUNTED_JOB, "--socket", str(self.daemon.socket),
                                   "--format", "json"]).stdout)["ranks"]
        self.assertEqual(self.query(f"sum by (rank) (flopscope_rank_records_lost_total{{{selector}}})"),
                         {0: float(ranks[0]["lost"])})
        # The latest step (steps_total counts the counted one too; the report numbers it as well
        # but leaves it out of its calls), and the counted step's FLOPs, as the report gives them.
        whole = report(self.daemon.socket, COUNTED_JOB, steps="0:")
        step_phase = self.step_phase(whole)
        last = int(self.query(f"flopscope_rank_steps_total{{{selector}}}")[0]) - 1
        latest = self.step_phase(report(self.daemon.socket, COUNTED_JOB, steps=f"{last}:{last}"))
        self.assertEqual(latest["calls"], 1)
        step_seconds = self.query(f"flopscope_rank_step_seconds{{{selector}}}")[0]
        self.assertAlmostEqual(step_seconds, latest["median_s"], delta=1e-9)
        step_flops = self.query(f"flopscope_rank_step_flops{{{selector}}}")[0]
        self.assertEqual(step_flops, step_phase["flops"])
        achieved = self.query(f"flopscope_rank_achieved_flops_per_second{{{selector}}}")[0]
        self.assertAlmostEqual(achieved, step_flops / step_seconds, delta=achieved * 1e-12)
        mfu = self.query(f"flopscope_rank_mfu_ratio{{{selector}}}")
        self.assertEqual(list(mfu), [0])
        self.assertGreater(mfu[0], 0)
        uuids = self.query_labels(f"flopscope_rank_mfu_ratio{{{selector}}}", "UUID")
        self.assertEqual(uuids, {0: "GPU-1"})

    def query_labels(self, promql, label):
        url = self.prom_url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        result = json.loads(http_get(url)[2])["data"]["result"]
        return {int(r["metric"]["rank"]): r["metric"][label] for r in result}

    @staticmethod
    def step_phase(report_json):
        return next(p for p in report_json["phases"] if p["name"] == "step")


if __name__ == "__main__":
    unittest.main()
