#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/trace_export/trace_file.h"
#include "flopscope/v1/query.pb.h"

namespace flopscope::client::testing {

// A small trace as Query.GetTrace streams it, for the export writers' tests: rank 0, one session
// on thread 11, paths model > layer and the `flopscope` step; a step (instance 1) holding model
// (2) holding layer (3); a kernel with counted FP32 FLOPs launched in layer (key 10, stream 7),
// a memcpy launched in model (key 11) and a kernel launched with no range open (key 12).
// Definitions in the first chunk, records in the second.
std::vector<v1::TraceChunk> SampleTrace();

// SampleTrace() written by a `Writer` (ChromeWriter, PerfettoWriter) through a TraceFile in the
// temporary directory, and the file's bytes read back; `name` makes the file's name.
template <typename Writer>
std::string WriteSampleTrace(const std::string& name) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  TraceFile file;
  EXPECT_TRUE(file.Open(path.string()).ok());
  Writer writer(file);
  for (const v1::TraceChunk& chunk : SampleTrace()) EXPECT_TRUE(writer.Add(chunk).ok());
  EXPECT_TRUE(writer.Finish().ok());
  EXPECT_TRUE(file.Close().ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::filesystem::remove(path);
  return bytes.str();
}

}  // namespace flopscope::client::testing
