// bench/ingest: kernel records per second, end to end — injector-side batching (the real
// Session, thread buffers, Exporter and the dlmopen'ed gRPC transport) → unix-socket gRPC → a
// real flopscoped process → SQLite — against raw prepared-statement inserts of the same rows into
// the same schema, measured in one run. Prints both rates and their ratio.
//
//   ingest [--records N] [--batch-rows B]
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "daemon/store/rank_store.h"
#include "injector/kernel_api.h"
#include "injector/session.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kKernelInsert[] =
    "INSERT INTO kernels(sid, correlation_id, path_id, range_instance_id, name_id, device_id, "
    "context_id, stream_id, start_ns, end_ns, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
    "kind, bytes, graph_id, graph_node_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

// A plausible kernel: 1 µs apart, a few hundred ns long, on one of 4 streams.
flopscope::injector::KernelRecord MakeKernel(uint64_t i, uint32_t name_id, int64_t base_ns) {
  flopscope::injector::KernelRecord k;
  k.correlation_id = i + 1;
  k.name_id = name_id;
  k.stream_id = static_cast<uint32_t>(7 + i % 4);
  k.start_ns = base_ns + static_cast<int64_t>(i) * 1000;
  k.end_ns = k.start_ns + 300 + static_cast<int64_t>(i % 200);
  k.grid_x = 108;
  k.grid_y = k.grid_z = 1;
  k.block_x = 256;
  k.block_y = k.block_z = 1;
  return k;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rows per second for single-row prepared INSERTs, `batch_rows` per transaction.
double RawInsertRate(const std::string& path, uint64_t records, uint64_t batch_rows) {
  auto db = flopscope::daemon::RankStore::OpenDatabase(path);
  if (!db.ok()) {
    std::fprintf(stderr, "ingest: %s\n", db.status().ToString().c_str());
    std::exit(1);
  }
  auto insert = (*db)->Prepare(kKernelInsert);
  if (!insert.ok()) {
    std::fprintf(stderr, "ingest: %s\n", insert.status().ToString().c_str());
    std::exit(1);
  }
  const int64_t base = NowNs();
  const auto start = Clock::now();
  for (uint64_t done = 0; done < records;) {
    (void)(*db)->Exec("BEGIN");
    for (uint64_t end = std::min(records, done + batch_rows); done < end; ++done) {
      const auto k = MakeKernel(done, 1, base);
      const int64_t values[] = {1,          static_cast<int64_t>(k.correlation_id),
                                0,          0,
                                k.name_id,  0,
                                0,          k.stream_id,
                                k.start_ns, k.end_ns,
                                k.grid_x,   k.grid_y,
                                k.grid_z,   k.block_x,
                                k.block_y,  k.block_z,
                                k.kind,     0,
                                0,          0};
      for (int c = 0; c < 20; ++c) (*insert)->BindInt(c + 1, values[c]);
      if (auto status = (*insert)->Run(); !status.ok()) {
        std::fprintf(stderr, "ingest: %s\n", status.ToString().c_str());
        std::exit(1);
      }
    }
    (void)(*db)->Exec("COMMIT");
  }
  return static_cast<double>(records) / Seconds(start);
}

pid_t StartDaemon(const std::string& socket, const std::string& data_dir) {
  const std::string daemon = FLOPSCOPE_BENCH_DAEMON;
  char* argv[] = {const_cast<char*>(daemon.c_str()),   const_cast<char*>("--socket"),
                  const_cast<char*>(socket.c_str()),   const_cast<char*>("--data-dir"),
                  const_cast<char*>(data_dir.c_str()), const_cast<char*>("--log-level"),
                  const_cast<char*>("warning"),        nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0) {
    std::fprintf(stderr, "ingest: cannot start %s\n", argv[0]);
    std::exit(1);
  }
  struct stat st;
  for (int i = 0; i < 200 && stat(socket.c_str(), &st) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return pid;
}

uint64_t StoredKernels(const std::string& rank_file) {
  auto db = flopscope::daemon::RankStore::OpenDatabase(rank_file);
  if (!db.ok()) return 0;
  auto count = (*db)->Prepare("SELECT COUNT(*) FROM kernels");
  if (!count.ok() || !(*count)->Step().value_or(false)) return 0;
  return (*count)->ColumnUint(0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flopscope ingest benchmark"};
  uint64_t records = 1'000'000;
  uint64_t batch_rows = 10'000;
  app.add_option("--records", records, "kernel records to send");
  app.add_option("--batch-rows", batch_rows, "rows per transaction for the raw baseline");
  CLI11_PARSE(app, argc, argv);

  const fs::path dir = fs::temp_directory_path() / ("flopscope-ingest-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const double raw = RawInsertRate((dir / "raw.sqlite").string(), records, batch_rows);
  std::printf("raw prepared inserts : %10.0f rows/s  (%llu rows, %llu per transaction)\n", raw,
              static_cast<unsigned long long>(records),
              static_cast<unsigned long long>(batch_rows));

  const std::string socket = (dir / "fs.sock").string();
  const pid_t daemon = StartDaemon(socket, (dir / "data").string());
  setenv("FLOPSCOPE_SOCKET", socket.c_str(), 1);
  setenv("FLOPSCOPE_JOB_ID", "ingest", 1);
  setenv("FLOPSCOPE_TRANSPORT_PATH", FLOPSCOPE_BENCH_TRANSPORT, 1);
  setenv("FLOPSCOPE_BUFFER_MB", "4096", 1);  // measure throughput, not the buffer bound
  setenv("FLOPSCOPE_EXIT_TIMEOUT_MS", "600000", 1);
  auto* session = flopscope::injector::Session::StartOnce();
  if (session == nullptr) {
    std::fprintf(stderr, "ingest: the injector session did not start\n");
    return 1;
  }
  const uint32_t name_id = flopscope::injector::InternKernelName(
      "void gemm_kernel<float, 128, 64>(float const*, float const*, float*, int, int, int)");
  const int64_t base = NowNs();
  const auto start = Clock::now();
  uint64_t accepted = 0;
  for (uint64_t i = 0; i < records; ++i) {
    accepted += flopscope::injector::EnqueueKernelRecord(MakeKernel(i, name_id, base)) ? 1 : 0;
  }
  const double enqueue_seconds = Seconds(start);
  session->exporter()->Stop();  // final batch, then waits for every acknowledgement
  const double e2e_seconds = Seconds(start);
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);

  const uint64_t stored = StoredKernels((dir / "data/jobs/ingest/rank-00000.sqlite").string());
  const double e2e = static_cast<double>(stored) / e2e_seconds;
  std::printf("enqueue on the job's thread: %8.1f ns/record\n", enqueue_seconds * 1e9 / records);
  std::printf(
      "end to end (injector → gRPC → flopscoped → SQLite): %10.0f records/s "
      "(%llu of %llu stored, %llu accepted)\n",
      e2e, static_cast<unsigned long long>(stored), static_cast<unsigned long long>(records),
      static_cast<unsigned long long>(accepted));
  std::printf("ratio end-to-end / raw: %.2f (target >= 0.50); target >= 500000 records/s: %s\n",
              e2e / raw, e2e >= 500000 ? "met" : "NOT met");
  std::printf("ingest: records_per_s=%.0f raw_rows_per_s=%.0f ratio=%.2f\n", e2e, raw, e2e / raw);
  fs::remove_all(dir);
  return stored == records ? 0 : 1;
}
