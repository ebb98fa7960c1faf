"""Untrusted producers: a malformed stream is rejected with a clear status, nothing of it is
stored, and the daemon keeps serving everyone else."""

import json
import queue
import time

import grpc

from flopscope.v1 import collector_pb2, records_pb2
from harness import DaemonTestCase, calls_by_path, client, report, run_job, test_program

STREAM = "/flopscope.v1.Collector/Stream"


class Producer:
    """A hand-driven Collector stream: send() messages, next() reads the daemon's answers."""

    def __init__(self, socket):
        self.channel = grpc.insecure_channel(f"unix:{socket}")
        self.outbox = queue.Queue()
        call = self.channel.stream_stream(
            STREAM, request_serializer=collector_pb2.UpMessage.SerializeToString,
            response_deserializer=collector_pb2.DownMessage.FromString)
        self.responses = call(iter(self.outbox.get, None), timeout=20)

    def send(self, **fields):
        self.outbox.put(collector_pb2.UpMessage(**fields))

    def next(self):
        return next(self.responses)

    def close(self):
        self.outbox.put(None)
        self.channel.close()

    def finish(self):
        """Half-closes the stream, as a process's end does, and waits until the daemon ends it
        (the session's end is recorded then)."""
        self.outbox.put(None)
        for _ in self.responses:
            pass
        self.channel.close()


def hello(session, job="bad", rank=0):
    return records_pb2.SessionHello(protocol_version=1, session_id=session, job_id=job, rank=rank,
                                    world_size=1, host="testhost", pid=1,
                                    start_time_ns=int(time.time() * 1e9))


def good_batch(seq, name="ok"):
    now = int(time.time() * 1e9)
    batch = records_pb2.Batch(seq=seq)
    if seq == 1:
        batch.paths.add(id=1, parent_id=0, name=name)
    batch.ranges.add(path_id=1, instance_id=seq, thread_id=1, start_ns=now, end_ns=now + 1000,
                     kind=records_pb2.RANGE_KIND_PUSH_POP)
    return batch


class BadBatchTest(DaemonTestCase):

    def test_bad_batch_rejected_and_daemon_keeps_serving(self):
        self.daemon.start()
        bad = Producer(self.daemon.socket)
        bad.send(hello=hello("bad-session"))
        self.assertEqual(bad.next().WhichOneof("msg"), "welcome")
        batch = good_batch(1, name="evil")
        batch.ranges.add(path_id=99, instance_id=2, thread_id=1, start_ns=1, end_ns=0)
        bad.send(batch=batch)
        with self.assertRaises(grpc.RpcError) as caught:
            bad.next()
        error = caught.exception
        self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(error.details(), "rejection without a message")
        trailers = dict(error.trailing_metadata() or ())
        self.assertEqual(trailers.get("flopscope-rejected-seq"), "1")
        bad.close()

        good = Producer(self.daemon.socket)
        good.send(hello=hello("good-session", job="good"))
        self.assertEqual(good.next().welcome.committed_seq, 0)
        good.send(batch=good_batch(1))
        self.assertEqual(good.next().ack.committed_seq, 1)
        good.send(batch=good_batch(1))  # a resend of a committed batch: acknowledged, not stored
        self.assertEqual(good.next().ack.committed_seq, 1)
        good.send(batch=good_batch(2))
        self.assertEqual(good.next().ack.committed_seq, 2)
        good.close()

        self.assertEqual(calls_by_path(report(self.daemon.socket, "good")), {"ok": 2})
        # The rejected session is listed (its hello was valid), but nothing of its batch is.
        bad_report = report(self.daemon.socket, "bad")
        self.assertEqual(bad_report["modules"], [])
        self.assertEqual(len(bad_report["ranks"]), 1)
        # The daemon counted the drop (1 path + 2 ranges, broken rule: ranges), beside the
        # producer's own losses, in the report (JSON and text) and in `flopscope jobs`.
        rejected = {"batches": 1, "records": 3, "rules": {"ranges": {"batches": 1, "records": 3}}}
        self.assertEqual(bad_report["rejected"], rejected)
        self.assertEqual(bad_report["ranks"][0]["rejected"], rejected)
        text = client(["report", "bad", "--socket", str(self.daemon.socket)])
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("Rejected by daemon: 1 batch / 3 records (rule: ranges: 1 / 3)", text.stdout)
        jobs = client(["jobs", "--socket", str(self.daemon.socket), "--format", "json"])
        self.assertEqual(jobs.returncode, 0, jobs.stderr)
        by_job = {job["job"]: job for job in json.loads(jobs.stdout)["jobs"]}
        self.assertEqual((by_job["bad"]["rejected_batches"], by_job["bad"]["rejected_records"]),
                         (1, 3))
        self.assertEqual(by_job["good"]["rejected_batches"], 0)
        jobs_text = client(["jobs", "--socket", str(self.daemon.socket)])
        self.assertIn("bad: rejected by daemon: 1 batch / 3 records", jobs_text.stdout)
        result = run_job(self.daemon.socket, "after", [test_program("nvtx_phases"), "--before", "1"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(calls_by_path(report(self.daemon.socket, "after")),
                         {"before": 1, "before/work": 1})

    def test_stream_must_start_with_hello(self):
        self.daemon.start()
        producer = Producer(self.daemon.socket)
        producer.send(batch=good_batch(1))
        with self.assertRaises(grpc.RpcError) as caught:
            producer.next()
        self.assertEqual(caught.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        producer.close()

    def test_job_id_cannot_escape_the_data_dir(self):
        self.daemon.start()
        producer = Producer(self.daemon.socket)
        producer.send(hello=hello("escape", job="../../outside"))
        with self.assertRaises(grpc.RpcError) as caught:
            producer.next()
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        producer.close()
        self.assertFalse((self.root / "outside").exists())
        self.assertFalse((self.root.parent / "outside").exists())


class AnnouncedLayoutTest(DaemonTestCase):
    """A `parallel` mark (e.g. Megatron's parallel state, announced by the PyTorch hooks) is the
    rank's layout from then on; a malformed one is kept as metadata and changes nothing."""

    def announce(self, session, rank, value, job="layout"):
        producer = Producer(self.daemon.socket)
        producer.send(hello=hello(session, job=job, rank=rank))
        self.assertEqual(producer.next().WhichOneof("msg"), "welcome")
        batch = good_batch(1)
        batch.metadata.add(key="parallel", value=value, time_ns=int(time.time() * 1e9))
        producer.send(batch=batch)
        self.assertEqual(producer.next().ack.committed_seq, 1)
        producer.close()

    def test_parallel_mark_sets_the_rank_layout(self):
        self.daemon.start()
        self.announce("layout-r0", 0, "tp=2 pp=1 dp=2 tp_rank=0 pp_rank=0 dp_rank=0")
        self.announce("layout-r1", 1, "tp=2 pp=1 dp=2 tp_rank=1 pp_rank=0 dp_rank=0")
        self.announce("layout-r2", 2, "tp=2 dp=two")  # malformed: layout stays the hello's
        listed = client(["ranks", "layout", "--socket", str(self.daemon.socket), "--format",
                         "json"])
        self.assertEqual(listed.returncode, 0, listed.stderr)
        by_rank = {r["rank"]: r for r in json.loads(listed.stdout)["ranks"]}
        self.assertEqual((by_rank[1]["tp_rank"], by_rank[1]["dp_rank"]), (1, 0))
        self.assertEqual((by_rank[2]["tp_rank"], by_rank[2]["dp_rank"]), (0, 0))
        self.assertIn("parallel mark", self.daemon.log())
