#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/tls/tls_files.h"

namespace flopscope::importer {

// `flopscope import FILE... [--job ID] [--rank N] [--socket PATH]`, for the client's CLI.
struct ImportOptions {
  std::vector<std::string> files;
  std::string job;          // empty: "import-<first file's name>"
  std::optional<int> rank;  // rank of the first file (the next files follow); else the traces'
  std::string socket;       // empty: flopscope::DefaultSocketPath(); a gRPC target also works
  std::optional<tls::TlsPem> tls;  // mutual TLS to a --server (client/connect/daemon_address.h)
  bool progress = true;            // draw a progress bar on stderr, when it is a terminal
};

// Imports Kineto / PyTorch-profiler traces (.json, .json.gz) and Nsight Systems SQLite exports
// into the daemon, one rank per file, as the records the injector would have sent. Every file
// is read and checked completely before anything is sent, so a malformed file stores nothing
// (the error names the file and the offset or row). Then each file is sent as one session, and
// `out` gets one line per file:
//   <file>: job <job> rank <r>: <n> ranges, <k> kernels (<m> memcpy, <s> memset), <p>% attributed
// Importing the same file again is recognised by the daemon and stores nothing twice.
absl::Status RunImport(const ImportOptions& options, std::ostream& out);

// The job id used when --job is not given: "import-<file name without extensions>", sanitized.
std::string DefaultImportJobId(const std::string& first_file);

}  // namespace flopscope::importer
