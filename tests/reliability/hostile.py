#!/usr/bin/python3
"""Hostile Collector client for the hand rerun of the reliability campaign (rows 3a gaps, 3b, log
injection; docs/reliability-rerun.md). Sends each case on its own stream and prints one line per
case: the gRPC status code, its message (shortened) and the acks received. Needs Debian's
python3-grpcio and stubs generated from proto/ (protoc + grpc_python_plugin) on PYTHONPATH.

Usage: hostile.py SOCKET VICTIM_JOB VICTIM_SESSION_ID [CASE...]   (no CASE: every case)"""

import os
import random
import sys
import time

import grpc
from flopscope.v1 import collector_pb2 as c
from flopscope.v1 import collector_pb2_grpc as cg
from flopscope.v1 import records_pb2 as r

NOW = time.time_ns()


def hello(job="hostile", rank=0, session=None, host="fuzzhost", pid=12345, token=""):
    session = session or f"fuzzhost-{random.randrange(1 << 30)}-{NOW}"
    return c.UpMessage(hello=r.SessionHello(
        protocol_version=1, session_id=session, job_id=job, rank=rank, world_size=1, host=host,
        pid=pid, injector_version="hostile", start_time_ns=NOW, command="hostile.py",
        resume_token=token))


def batch(seq, ranges=(), paths=((1, 0, "outer"),), losses=(), metadata=(), final=False):
    b = r.Batch(seq=seq, final=final)
    for pid, parent, name in paths:
        b.paths.add(id=pid, parent_id=parent, name=name)
    for inst, parent, start, end in ranges:
        b.ranges.add(path_id=1, instance_id=inst, parent_instance_id=parent, thread_id=1,
                     start_ns=start, end_ns=end, kind=r.RANGE_KIND_PUSH_POP)
    for cause, n in losses:
        b.losses.add(cause=cause, records=n)
    for key, value in metadata:
        b.metadata.add(key=key, value=value, time_ns=NOW)
    return c.UpMessage(batch=b)


def ok_ranges(n, first=1):
    return [(first + i, 0, NOW - 10_000_000 + i * 1000, NOW - 10_000_000 + i * 1000 + 500)
            for i in range(n)]


def run(sock, messages, raw=False, pause=0.3):
    """Sends `messages` (UpMessage, or bytes when raw) on one stream; returns (code, details, acks)."""
    channel = grpc.insecure_channel(f"unix:{sock}")
    method = channel.stream_stream(
        "/flopscope.v1.Collector/Stream",
        request_serializer=(lambda m: m if isinstance(m, bytes) else m.SerializeToString()),
        response_deserializer=c.DownMessage.FromString)

    def requests():
        for m in messages:
            yield m
        time.sleep(pause)  # let the daemon answer before the client half-closes

    acks, welcome = [], None
    call = method(requests(), timeout=20)
    try:
        for down in call:
            if down.HasField("welcome"):
                welcome = down.welcome.committed_seq
            elif down.HasField("ack"):
                acks.append(down.ack.committed_seq)
        code, details = call.code(), call.details()
    except grpc.RpcError as e:
        code, details = e.code(), e.details()
    channel.close()
    return code.name, (details or "")[:150], welcome, acks


def cases(victim_job, victim_session):
    s = {}
    big = 2 ** 63 + 1
    s["unparsable_after_hello"] = ([hello().SerializeToString(), b"\xff\xff\xff\xff garbage"], True)
    s["seq_2^63+1"] = ([hello(), batch(big, ok_ranges(1))], False)
    s["seq_2^64-1"] = ([hello(), batch(2 ** 64 - 1, ok_ranges(1))], False)
    s["dup_instance_ids"] = ([hello(), batch(1, [ok_ranges(1)[0], ok_ranges(1)[0]])], False)
    # a later batch (a new seq, so no resend) repeating the first one's occurrence
    s["dup_instance_id_later_batch"] = ([hello(), batch(1, ok_ranges(1)), batch(2, ok_ranges(1))],
                                        False)
    s["dangling_parent_instance"] = ([hello(), batch(1, [(5, 999, NOW - 1000, NOW - 500)])], False)
    s["loss_2^64-1"] = ([hello(), batch(1, losses=[(1, 2 ** 64 - 1)])], False)
    s["loss_2^48"] = ([hello(), batch(1, losses=[(1, 2 ** 48)])], False)
    s["flops_mark_1e400"] = ([hello(job="hostile-flops"), batch(1, ok_ranges(1),
                              metadata=[("flops outer", "1e400"), ("params outer", "1e400")],
                              final=True)], False)
    s["range_2000_to_now+23h"] = ([hello(job="hostile-time"), batch(
        1, [(1, 0, 946_684_800 * 10 ** 9 + 1, NOW + 23 * 3600 * 10 ** 9)], final=True)], False)
    s["range_now+2days"] = ([hello(), batch(1, [(1, 0, NOW, NOW + 48 * 3600 * 10 ** 9)])], False)
    s["log_newline_session"] = ([hello(session="x\nflopscoped: FORGED LOG LINE session",
                                       host="h\nflopscoped: FORGED LOG LINE host")], False)
    s["ansi_host"] = ([hello(job="hostile-ansi", host="\x1b[31mRED\x1b[0m\x1b]0;title\x07"),
                       batch(1, ok_ranges(1), final=True)], False)
    s["nonutf8_host"] = ([hello(host="h\udcff".encode("utf-8", "surrogateescape").decode(
        "latin-1"))], False)
    # 3b: another job's rank, then the victim's own session by its id (no token / a wrong one)
    s["hello_into_victim_job"] = ([hello(job=victim_job, rank=0), batch(
        1, ok_ranges(3), metadata=[("params outer", "999999999")], losses=[(1, 123456)])], False)
    s["resume_victim_session_no_token"] = ([hello(job=victim_job, rank=0, session=victim_session),
                                            batch(999, ok_ranges(1, 10 ** 9))], False)
    s["resume_victim_session_wrong_token"] = ([hello(job=victim_job, rank=0,
                                                     session=victim_session, token="00" * 32),
                                               batch(999, ok_ranges(1, 10 ** 9))], False)
    s["victim_session_other_job"] = ([hello(job="hostile-other", rank=3, session=victim_session),
                                      batch(1, ok_ranges(1))], False)
    return s


def bitflips(count=200):
    """200 bit-flipped valid batches after a valid hello: statuses by code."""
    valid = batch(1, ok_ranges(20)).SerializeToString()
    codes = {}
    for i in range(count):
        b = bytearray(valid)
        for _ in range(1 + i % 4):
            b[random.randrange(len(b))] ^= 1 << random.randrange(8)
        code, details, _, acks = run(SOCK, [hello().SerializeToString(), bytes(b)], raw=True,
                                     pause=0.05)
        key = f"{code}{'+ack' if acks else ''}"
        codes[key] = codes.get(key, 0) + 1
    return codes


if __name__ == "__main__":
    SOCK, victim_job, victim_session = sys.argv[1:4]
    wanted = sys.argv[4:]
    random.seed(15)
    for name, (messages, raw) in cases(victim_job, victim_session).items():
        if wanted and name not in wanted:
            continue
        print(name, *run(SOCK, messages, raw), sep=" | ", flush=True)
    if not wanted or "bitflips" in wanted:
        print("bitflips(200) |", bitflips(), flush=True)
