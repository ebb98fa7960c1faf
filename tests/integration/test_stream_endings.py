"""How a session's stream ends (issue 15, "nothing lost silently"): a message that does not parse
ends the stream with an error, never OK; a process that leaves by os._exit or exec still delivers
what it recorded; one killed by SIGKILL is flagged in the store as ended without a final batch,
and what it had announced but never sent is counted (not_arrived) in jobs, ranks and report."""

import json
import os
import signal
import subprocess
import time

import grpc

from flopscope.v1 import collector_pb2, records_pb2
from harness import TEST_BIN_DIR, DaemonTestCase, client, report, run_job, start_job
from test_bad_batch import Producer

STREAM = "/flopscope.v1.Collector/Stream"

# Records `ranges` push/pop pairs through the injector (ctypes -> NVTX), then leaves as told.
PROGRAM = r"""
import ctypes, os, signal, sys, time
helper = ctypes.CDLL(sys.argv[1])
ranges, how = int(sys.argv[2]), sys.argv[3]
for _ in range(ranges):
    helper.flopscope_test_push(b"work")
    helper.flopscope_test_pop()
print("recorded", flush=True)
if how == "sigkill":
    time.sleep(float(sys.argv[4]))  # several flush intervals: drained and acknowledged
    os.kill(os.getpid(), signal.SIGKILL)
elif how == "exit":
    os._exit(3)  # no atexit handlers, no flush of stdio
elif how == "exec":
    os.execv("/bin/sh", ["sh", "-c", "exit 4"])
"""


def hello(session, job, token=""):
    message = records_pb2.SessionHello(protocol_version=1, session_id=session, job_id=job,
                                       rank=0, world_size=1, host="testhost", pid=1,
                                       start_time_ns=int(time.time() * 1e9))
    if token:  # a later stream of the session proves it is the same producer
        message.resume_token = token
    return message


def ranges_batch(seq, count, final=False):
    now = int(time.time() * 1e9)
    batch = records_pb2.Batch(seq=seq, final=final)
    if seq == 1:
        batch.paths.add(id=1, parent_id=0, name="work")
    for i in range(count):
        batch.ranges.add(path_id=1, instance_id=seq * 1000 + i, thread_id=1, start_ns=now,
                         end_ns=now + 1000, kind=records_pb2.RANGE_KIND_PUSH_POP)
    return batch


def raw_stream(socket, messages):
    """Sends `messages` (bytes, unchecked) on a Collector stream; (replies, status code,
    details) once the daemon ends it."""
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        call = channel.stream_stream(STREAM, request_serializer=lambda raw: raw,
                                     response_deserializer=collector_pb2.DownMessage.FromString)
        responses = call(iter(messages), timeout=20)
        replies = []
        try:
            for reply in responses:
                replies.append(reply)
        except grpc.RpcError as error:
            return replies, error.code(), error.details()
        return replies, responses.code(), responses.details()


class StreamEndingsTest(DaemonTestCase):

    def listing(self, *args):
        result = client([*args, "--socket", str(self.daemon.socket)])
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def json_listing(self, *args):
        return json.loads(self.listing(*args, "--format", "json"))

    def run_program(self, job, how, ranges, *extra, env=None):
        command = ["/usr/bin/python3", "-c", PROGRAM, str(TEST_BIN_DIR / "libnvtx_pyhelper.so"),
                   str(ranges), how, *extra]
        full_env = {"FLOPSCOPE_FLUSH_MS": "20"}
        full_env.update(env or {})
        return run_job(self.daemon.socket, job, command, env=full_env, timeout=60)

    def test_a_message_that_does_not_parse_ends_the_stream_with_an_error(self):
        self.daemon.start()
        garbage = b"\xff\xff\xff\xff"  # a field tag whose varint never ends
        first = collector_pb2.UpMessage(hello=hello("raw-session", "raw")).SerializeToString()
        replies, code, details = raw_stream(self.daemon.socket, [first, garbage])
        self.assertEqual([r.WhichOneof("msg") for r in replies], ["welcome"])
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, details)
        self.assertIn("does not parse", details)
        # As the first message too, before any file is touched.
        replies, code, details = raw_stream(self.daemon.socket, [garbage])
        self.assertEqual((replies, code), ([], grpc.StatusCode.INVALID_ARGUMENT), details)
        # Counted where it was dropped, like a rejected batch.
        jobs = {j["job"]: j for j in self.json_listing("jobs")["jobs"]}
        self.assertEqual(jobs["raw"]["rejected_batches"], 1)

    def test_exit_without_atexit_delivers_what_was_recorded(self):
        self.daemon.start()
        result = self.run_program("exit-job", "exit", 500)
        self.assertEqual(result.returncode, 3, result.stderr)
        rep = report(self.daemon.socket, "exit-job")
        self.assertEqual({m["path"]: m["calls"] for m in rep["modules"]}, {"work": 500})
        self.assertEqual(rep["sessions_without_final"], 0)  # the final batch went out

    def test_exec_delivers_what_was_recorded_before(self):
        self.daemon.start()
        result = self.run_program("exec-job", "exec", 500)
        self.assertEqual(result.returncode, 4, result.stderr)  # the new image's exit code
        rep = report(self.daemon.socket, "exec-job")
        self.assertEqual({m["path"]: m["calls"] for m in rep["modules"]}, {"work": 500})
        self.assertEqual(rep["sessions_without_final"], 0)

    def test_sigkill_is_flagged_as_ended_without_final_batch(self):
        self.daemon.start()
        result = self.run_program("killed-job", "sigkill", 300, "1.0")
        self.assertIn(result.returncode, (128 + signal.SIGKILL, -signal.SIGKILL), result.stderr)
        rep = report(self.daemon.socket, "killed-job")
        # Drained and acknowledged before the kill: all there, and the end is not silent.
        self.assertEqual({m["path"]: m["calls"] for m in rep["modules"]}, {"work": 300})
        self.assertEqual(rep["sessions_without_final"], 1)
        self.assertEqual(rep["ranks"][0]["sessions_without_final"], 1)
        jobs = {j["job"]: j for j in self.json_listing("jobs")["jobs"]}
        self.assertEqual(jobs["killed-job"]["sessions_without_final"], 1)
        ranks = self.json_listing("ranks", "killed-job")["ranks"]
        self.assertEqual([r["sessions_without_final"] for r in ranks], [1])
        for text in (self.listing("jobs"), self.listing("ranks", "killed-job"),
                     self.listing("report", "killed-job")):
            self.assertIn("1 session ended without a final batch", text)

    def test_what_was_announced_and_never_arrived_is_counted(self):
        self.daemon.start()
        # A producer that said it had 10 records queued, delivered 3 and ended: 7 never arrived.
        producer = Producer(self.daemon.socket)
        producer.send(hello=hello("s-1", "announced"))
        welcome = producer.next().welcome
        self.assertEqual(welcome.committed_seq, 0)
        token = getattr(welcome, "resume_token", "")
        producer.send(progress=collector_pb2.Progress(records_queued=10))
        producer.send(batch=ranges_batch(1, 3))
        self.assertEqual(producer.next().ack.committed_seq, 1)
        producer.finish()
        rep = report(self.daemon.socket, "announced")
        self.assertEqual(rep["losses"].get("not_arrived"), 10 - 3)
        self.assertEqual(rep["sessions_without_final"], 1)
        # Its spool delivers 4 more later, on a stream that announces nothing: 3 still missing.
        replay = Producer(self.daemon.socket)
        replay.send(hello=hello("s-1", "announced", token))
        self.assertEqual(replay.next().welcome.committed_seq, 1)
        replay.send(batch=ranges_batch(2, 4))
        self.assertEqual(replay.next().ack.committed_seq, 2)
        replay.finish()
        rep = report(self.daemon.socket, "announced")
        self.assertEqual(rep["losses"].get("not_arrived"), 10 - 3 - 4)
        self.assertEqual(rep["sessions_without_final"], 1)
        jobs = {j["job"]: j for j in self.json_listing("jobs")["jobs"]}
        self.assertEqual(jobs["announced"]["lost"], 10 - 3 - 4)  # sessions are not records
        # Then the final batch: nothing is missing any more.
        last = Producer(self.daemon.socket)
        last.send(hello=hello("s-1", "announced", token))
        self.assertEqual(last.next().welcome.committed_seq, 2)
        last.send(batch=ranges_batch(3, 3, final=True))
        self.assertEqual(last.next().ack.committed_seq, 3)
        last.finish()
        rep = report(self.daemon.socket, "announced")
        self.assertNotIn("not_arrived", rep["losses"])
        self.assertEqual(rep["sessions_without_final"], 0)
        self.assertEqual({m["path"]: m["calls"] for m in rep["modules"]}, {"work": 10})


if __name__ == "__main__":
    import unittest
    unittest.main()
