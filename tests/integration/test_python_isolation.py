"""The injector inside a Python process that uses Debian's grpcio and protobuf (both linked to the
system libgrpc / libprotobuf): the job's own gRPC and protobuf keep working, and the injector's
transport still reaches the daemon."""

import subprocess
import textwrap

from harness import DaemonTestCase, TEST_BIN_DIR, calls_by_path, report, run_job

SCRIPT = textwrap.dedent("""
    import ctypes, sys
    from concurrent import futures
    import grpc
    from google.protobuf import struct_pb2
    from google.protobuf.internal import api_implementation

    helper = ctypes.CDLL(sys.argv[1])
    sock = sys.argv[2]
    echo = grpc.unary_unary_rpc_method_handler(
        lambda request, context: request,
        request_deserializer=struct_pb2.Struct.FromString,
        response_serializer=struct_pb2.Struct.SerializeToString)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Echo", {"Say": echo}),))
    server.add_insecure_port("unix:" + sock)
    server.start()
    channel = grpc.insecure_channel("unix:" + sock)
    say = channel.unary_unary("/t.Echo/Say", request_serializer=struct_pb2.Struct.SerializeToString,
                              response_deserializer=struct_pb2.Struct.FromString)
    for i in range(5):
        helper.flopscope_test_push(b"python_step")
        message = struct_pb2.Struct()
        message["i"] = i
        message["text"] = "hello"
        answer = say(message, timeout=10)
        assert answer["i"] == i and answer["text"] == "hello", answer
        helper.flopscope_test_pop()
    maps = open("/proc/self/maps").read()
    assert "libflopscope_inject.so" in maps, "injector not loaded"
    assert "libflopscope_transport.so" in maps, "transport not loaded"
    channel.close()
    server.stop(None)
    print("python ok", api_implementation.Type())
""")


class PythonIsolationTest(DaemonTestCase):

    def test_grpcio_and_protobuf_unaffected(self):
        self.daemon.start()
        script = self.root / "job.py"
        script.write_text(SCRIPT)
        result = run_job(self.daemon.socket, "py", [
            "/usr/bin/python3", str(script), str(TEST_BIN_DIR / "libnvtx_pyhelper.so"),
            str(self.root / "echo.sock")])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "python ok cpp\n")
        self.assertEqual(calls_by_path(report(self.daemon.socket, "py")), {"python_step": 5})
