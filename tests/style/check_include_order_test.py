#!/usr/bin/env python3
"""Self-test of check_include_order.py: a tiny fixture tree per case, the checker run on it."""

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_include_order  # noqa: E402


class CheckIncludeOrderTest(unittest.TestCase):

    def run_on(self, files):
        """Writes `files` ({path: text}) under a fresh root; returns (exit code, output lines)."""
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                full = os.path.join(root, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w", encoding="utf-8") as f:
                    f.write(text)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = check_include_order.main(["--root", root])
            return code, out.getvalue().splitlines()

    def test_clean_tree_passes(self):
        code, lines = self.run_on({
            "injector/session.cc": '#include "injector/export/exporter.h"\n'
                                   '#include "common/utf8.h"\n',
            "injector/export/exporter.h": '#include "injector/ranges/path_table.h"\n'
                                          '#include "injector/warn.h"\n',
            "injector/ranges/path_table.h": '#include "injector/records/thread_buffer.h"\n',
            "injector/records/thread_buffer.h": '#include "injector/transport/transport_abi.h"\n',
            "injector/cupti/kernel_tracer.h":
                '#include "injector/kernel_tracing.h"\n'
                '#include "injector/cupti/counter_windows/counter_collector.h"\n',
            "injector/cupti/counter_windows/counter_collector.cc":
                '#include "injector/cupti/cupti_api.h"\n#include "counters/metric_catalog.h"\n',
            "injector/transport/grpc_transport.h": "#include <grpcpp/grpcpp.h>\n",
        })
        self.assertEqual(code, 0, lines)

    def test_upward_include_names_file_line_and_rule(self):
        code, lines = self.run_on({
            "injector/records/thread_buffer.cc": "// first line\n"
                                                 '#include "injector/ranges/range_tracker.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertIn('injector/records/thread_buffer.cc:2: includes "injector/ranges/range_tracker.h"',
                      lines[0])
        self.assertIn("records/ may include only records/", lines[0])

    def test_ranges_may_not_include_export_or_root(self):
        code, lines = self.run_on({
            "injector/ranges/step_tracker.cc": '#include "injector/export/exporter.h"\n'
                                               '#include "injector/session.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertEqual(len([l for l in lines if "step_tracker.cc:" in l]), 2)

    def test_grpc_and_absl_outside_transport_fail(self):
        code, lines = self.run_on({
            "injector/export/transport_sink.cc": "#include <grpcpp/grpcpp.h>\n"
                                                 '#include "absl/strings/str_cat.h"\n'
                                                 '#include "flopscope/v1/records.pb.h"\n',
        })
        self.assertEqual(code, 1)
        problems = [l for l in lines if "transport_sink.cc:" in l]
        self.assertEqual(len(problems), 3)
        self.assertTrue(all("only injector/transport/" in l for l in problems))

    def test_cupti_may_not_include_export_or_session(self):
        code, lines = self.run_on({
            "injector/cupti/kernel_tracer.cc": '#include "injector/session.h"\n'
                                               '#include "injector/export/exporter.h"\n',
            "injector/cupti/counter_windows/window_ledger.cc":
                '#include "injector/cupti/kernel_tracer.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertEqual(len([l for l in lines if ": includes " in l]), 3)

    def test_counters_only_from_cupti(self):
        code, lines = self.run_on({
            "injector/export/exporter.cc": '#include "counters/metric_catalog.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertIn("only injector/cupti/ may include counters/", lines[0])

    def test_tests_and_testing_helpers_are_not_checked(self):
        code, lines = self.run_on({
            "injector/records/thread_buffer_unittest.cc": '#include "injector/session.h"\n',
            "injector/export/testing/dump_reader.cc": "#include <grpcpp/grpcpp.h>\n",
        })
        self.assertEqual(code, 0, lines)

    def test_daemon_stages_include_only_earlier_stages(self):
        code, lines = self.run_on({
            "daemon/store/rank_store.cc": '#include "daemon/base/logger.h"\n'
                                          '#include "daemon/validate/batch_validator.h"\n'
                                          '#include "common/utf8.h"\n'
                                          '#include "flopscope/v1/records.pb.h"\n',
            "daemon/server/daemon_server.cc": '#include "daemon/query/query_service.h"\n',
            "daemon/main.cc": '#include "daemon/server/daemon_server.h"\n',
            "daemon/ingest/spool_collector.cc": '#include "common/spool/spool_file.h"\n',
        })
        self.assertEqual(code, 0, lines)

    def test_a_daemon_back_arrow_names_the_order(self):
        code, lines = self.run_on({
            "daemon/store/step_folding.cc": '#include "daemon/report/report_builder.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertIn('daemon/store/step_folding.cc:1: includes "daemon/report/report_builder.h"',
                      lines[0])
        self.assertIn("daemon/store/ may include only base/, validate/, store/", lines[0])

    def test_a_program_may_not_include_another_programs_code(self):
        code, lines = self.run_on({
            "daemon/report/report_builder.cc": '#include "client/text/text_table.h"\n'
                                               '#include "injector/session.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertEqual(len([l for l in lines if "another program's code" in l]), 2)

    def test_a_folder_outside_the_order_is_named(self):
        code, lines = self.run_on({
            "daemon/misc/helper.cc": '#include "daemon/base/logger.h"\n',
            "daemon/base/logger.cc": '#include "daemon/loose.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertTrue(any("daemon/misc/ is no stage folder" in l for l in lines), lines)
        self.assertTrue(any("daemon/loose.h is in no stage folder" in l for l in lines), lines)

    def test_client_stages_follow_their_order(self):
        code, lines = self.run_on({
            "client/text/report_text.cc": '#include "client/model/profile_model.h"\n',
            "client/main.cc": '#include "client/commands/query_commands.h"\n'
                              '#include "importer/import_command.h"\n',
            "client/model/profile_model.cc": '#include "client/text/text_table.h"\n',
        })
        self.assertEqual(code, 1)
        self.assertEqual(len([l for l in lines if ": includes " in l]), 1, lines)
        self.assertIn("client/model/ may include only connect/, model/", lines[0])

    def test_daemon_tests_and_helpers_are_not_checked(self):
        code, lines = self.run_on({
            "daemon/base/logger_unittest.cc": '#include "daemon/testing/test_daemon.h"\n',
            "daemon/testing/test_daemon.h": '#include "daemon/server/daemon_options.h"\n',
        })
        self.assertEqual(code, 0, lines)


if __name__ == "__main__":
    unittest.main()
