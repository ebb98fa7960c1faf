#include "injector/session.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/made_counts_page.h"
#include "common/metadata_keys.h"
#include "common/mutex.h"
#include "common/spool_dir.h"
#include "common/version.h"
#include "injector/export/dump_sink.h"
#include "injector/export/transport_loader.h"
#include "injector/export/transport_sink.h"
#include "injector/sigterm_drain.h"
#include "injector/warn.h"

namespace flopscope::injector {
namespace {

constexpr const char* kNoDriverStatus = "no CUDA driver: NVTX ranges only";
constexpr const char* kAwaitingCudaStatus =
    "CUDA was not initialised in this process (kernel tracing starts when it is)";
constexpr const char* kGpuStatusKey = "gpu.status";
// SIGTERM's share of SigtermDrain::kBoundMs spent waiting for acknowledgements; the rest is for
// the final cycle and the spool (what is not acknowledged by then is in the spool file).
constexpr uint32_t kSigtermAckWaitMs = SigtermDrain::kBoundMs / 2;

// True while this thread builds the session: a nested start (from something the start itself
// loads) must not deadlock on the start mutex.
thread_local bool t_starting;

// Serialises session starts; never held by anything that could start a session in turn.
Mutex& StartMutex() {
  static Mutex mutex;
  return mutex;
}

const char* RealEnv(const char* name) { return std::getenv(name); }

// Whether a CUDA driver exists, without doing any CUDA work. The handle is kept (never closed):
// the job will use the driver anyway when it has one.
bool CudaDriverPresent() {
  if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD) != nullptr) return true;
  return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
}

// Whether the driver will call this library's InitializeInjection when CUDA initialises
// (CUDA_INJECTION64_PATH names it). When it names another tool, or nothing because the library
// came in through NVTX_INJECTION64_PATH alone, kernel tracing must attach at session start.
bool DriverWillInjectUs() {
  const char* configured = std::getenv("CUDA_INJECTION64_PATH");
  if (configured == nullptr || *configured == '\0') return false;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&CudaDriverPresent), &info) == 0 ||
      info.dli_fname == nullptr) {
    return false;
  }
  char* wanted = realpath(configured, nullptr);
  char* self = realpath(info.dli_fname, nullptr);
  const bool same = wanted != nullptr && self != nullptr && std::strcmp(wanted, self) == 0;
  std::free(wanted);
  std::free(self);
  return same;
}

// FLOPSCOPE_BUFFER_MB is shared by everything the session holds in memory: 3/8 for the thread
// buffers, which also bounds the drained copy the exporter assembles batches from (at most what
// the buffers held), and 1/4 for the transport's unacknowledged batches (protobuf arenas).
uint64_t ThreadBufferShare(uint64_t budget) { return budget / 8 * 3; }
uint64_t PendingShare(uint64_t budget) { return budget / 4; }

// What the made-counts file says about the session: the hello's fields known before the
// transport starts, so that the daemon's collector can charge the file's count to the session
// even when the process died before its spool (and the hello in it) existed.
MadeSession MadeSessionOf(const SessionIdentity& identity) {
  MadeSession session;
  session.session_id = identity.session_id;
  session.job_id = identity.job_id;
  session.host = identity.host;
  session.injector_version = kVersion;
  session.command = identity.command;
  session.rank = identity.rank;
  session.local_rank = identity.local_rank;
  session.world_size = identity.world_size;
  const ParallelLayout& layout = identity.layout;
  session.layout_source = layout.source;
  session.tp_size = layout.tp_size;
  session.pp_size = layout.pp_size;
  session.dp_size = layout.dp_size;
  session.tp_rank = layout.tp_rank;
  session.pp_rank = layout.pp_rank;
  session.dp_rank = layout.dp_rank;
  session.pid = identity.pid;
  session.start_time_ns = identity.start_time_ns;
  return session;
}

// The session's made-counts file, beside its spool: only when batches go to a daemon through a
// spool (its collector reads the file). Null, with one stderr line when creating it failed
// (the transport says it when the directory is unusable).
std::unique_ptr<MadeCountsPage> CreateMadeCounts(const InjectorConfig& config,
                                                 const SessionIdentity& identity) {
  if (!config.dump_path.empty() || config.spool_bytes == 0) return nullptr;
  std::string error;
  if (!PrepareSpoolDirectory(config.spool_dir, &error)) return nullptr;
  const std::string path =
      config.spool_dir + "/" + SessionFileStem(identity.session_id) + MadeCountsPage::kSuffix;
  std::unique_ptr<MadeCountsPage> page =
      MadeCountsPage::Create(path, MadeSessionOf(identity), &error);
  if (page == nullptr) {
    Warn("records left in buffers by a SIGKILL will not be counted: " + error);
  }
  return page;
}

}  // namespace

Session::Session(InjectorConfig config, SessionIdentity identity)
    : config_(std::move(config)),
      identity_(std::move(identity)),
      clock_(config_.realtime_clock ? RangeClock::Source::kRealtime : RangeClock::Detect()),
      made_counts_(CreateMadeCounts(config_, identity_)),
      buffers_(ThreadBufferShare(config_.buffer_bytes), &losses_),
      tracker_(&clock_, &paths_, &buffers_, &losses_),
      tracing_(
          MakeKernelTracing(&trace_sink_, RealEnv, &tracing_warnings_, &tracing_unavailable_)) {
  // Set before the session is published: buffers call it from application threads, and the
  // tracker reports steps from the first NVTX call on.
  buffers_.SetWakeCallback(&Session::WakeExporter, this);
  buffers_.SetMadeCounts(made_counts_.get());
  tracker_.SetStepTracker(&steps_);
  if (tracing_ != nullptr) steps_.SetListener(tracing_->counter_windows());
}

void Session::WakeExporter(void* session) {
  if (Exporter* exporter = static_cast<Session*>(session)->exporter()) exporter->Wake();
}

Session* Session::StartOnce(StartReason reason) noexcept {
  if (Session* session = Current()) return session;
  if (disabled_.load(std::memory_order_acquire) || t_starting) return nullptr;
  try {
    MutexLock lock(&StartMutex());
    if (Session* session = Current()) return session;
    if (disabled_.load(std::memory_order_acquire)) return nullptr;
    t_starting = true;
    InjectorConfig config = ConfigFromEnvironment(RealEnv);
    ResolveSpoolDirectory(&config);  // before the made-counts file and the transport use it
    SessionIdentity identity = IdentityFromEnvironment(RealEnv, CollectHostFacts());
    for (const std::string& warning : config.warnings) Warn(warning);
    for (const std::string& warning : identity.warnings) Warn(warning);
    auto* session = new Session(std::move(config), std::move(identity));
    // Published before the slow half so that NVTX calls made meanwhile are already recorded.
    current_.store(session, std::memory_order_release);
    session->StartBackground(reason);
    t_starting = false;
    return session;
  } catch (...) {
    t_starting = false;
    return Current();
  }
}

void Session::StartBackground(StartReason reason) {
  for (const std::string& warning : tracing_warnings_) Warn(warning);
  gpu_status_ = InitialGpuStatus(reason);
  Exporter::Options options;
  options.flush_ms = config_.flush_ms;
  options.exit_timeout_ms = config_.exit_timeout_ms;
  // Several batches must fit in the transport's share, or one batch would be all it holds.
  options.max_batch_bytes = std::clamp<uint64_t>(PendingShare(config_.buffer_bytes) / 8, 64 << 10,
                                                 BatchAssembler::kDefaultMaxBytes);
  Exporter::Sources sources{
      &paths_, &strings_, &buffers_, &losses_, &clock_,
      [this] { return tracker_.CountOpenRanges(); },
      // Kernel records reach the session on the exporter thread (see cupti/trace_outbox.h),
      // which also runs CUPTI's final forced flush at exit.
      [this](bool final) {
        if (tracing_ != nullptr) tracing_->Collect(final);
      },
      [this](uint32_t steps, std::string_view metric_set, uint64_t control_id) {
        return RequestCounterWindow(steps, metric_set, control_id);
      },
      // `flopscope where`: what each thread has open, read once a second at most.
      [this](std::vector<ThreadOpenStacks>* out) { tracker_.ReadOpenStacks(out); }};
  exporter_ = std::make_unique<Exporter>(options, std::move(sources), MakeSink());
  // fork(): the child has a copy of our memory but none of our threads, and any lock another
  // thread held at the fork stays locked forever. Rather than repair that, the child runs
  // without the injector (see OnForkChild). Registered here, not in the constructor: a process
  // that never started a session forks children that may start their own.
  pthread_atfork(nullptr, nullptr, &Session::OnForkChild);
  std::atexit(&Session::OnProcessExit);
  exporter_->Start();
  running_exporter_.store(exporter_.get(), std::memory_order_release);
  // After the exporter runs: SIGTERM from now on drains it (only where SIGTERM's disposition is
  // the default; an application's handler is left alone).
  SigtermDrain::Install(&Session::DrainOnSigterm);
}

std::string Session::InitialGpuStatus(StartReason reason) {
  if (!CudaDriverPresent()) {
    Warn(kNoDriverStatus);
    return kNoDriverStatus;
  }
  if (tracing_ == nullptr) return tracing_unavailable_;
  // Attach now when the driver is initialising us, or when it never will: then the session's
  // start (the job's first NVTX call) is the earliest moment left, normally before its first
  // context.
  if (reason == StartReason::kCudaInit || !DriverWillInjectUs()) return AttachKernelTracing();
  return kAwaitingCudaStatus;
}

std::string Session::AttachKernelTracing() {
  const TracingOutcome outcome = tracing_->Attach();
  if (!outcome.tracing) Warn(outcome.status);
  if (outcome.tracing) {
    // Registered right after the attach, so after the exit handlers CUDA registered while
    // initialising: handlers run in reverse order, so CUPTI's last flush runs on the exiting
    // thread while CUDA and libcupti are still whole (review D3).
    static const bool registered = std::atexit(&Session::OnTracingExit) == 0;
    (void)registered;
  }
  // The hello may have gone out before this (the session began at an NVTX call): the daemon
  // takes the latest gpu.status over the hello's.
  tracker_.AppendMetadata(kGpuStatusKey, outcome.status);
  return outcome.status;
}

void Session::OnCudaInitialized() noexcept {
  if (tracing_ == nullptr || tracing_->attempted()) return;
  try {
    AttachKernelTracing();
  } catch (...) {
    // Out of memory formatting the status: tracing itself is attached or not regardless.
  }
}

ControlAnswer Session::RequestCounterWindow(uint32_t steps, std::string_view metric_set,
                                            uint64_t control_id) {
  // Without a driver or kernel tracing there is nothing to count with: say why.
  if (gpu_status_ == kNoDriverStatus) return ControlAnswer{false, gpu_status_};
  if (tracing_ == nullptr) return ControlAnswer{false, tracing_unavailable_};
  CounterWindows* windows = tracing_->counter_windows();
  if (windows == nullptr) return ControlAnswer{false, "this kernel tracing has no counter windows"};
  return windows->RequestWindow(steps, metric_set, control_id);
}

std::unique_ptr<BatchSink> Session::MakeSink() const {
  if (!config_.dump_path.empty()) {
    return std::make_unique<DumpSink>(config_.dump_path, identity_, gpu_status_);
  }
  const std::string library =
      config_.transport_path.empty() ? TransportLoader::DefaultPath() : config_.transport_path;
  TransportSink::Limits limits;
  limits.max_pending_bytes = PendingShare(config_.buffer_bytes);
  if (config_.spool_bytes > 0) limits.spool_dir = config_.spool_dir;
  limits.max_spool_bytes = config_.spool_bytes;
  limits.spool_off_reason =
      config_.spool_bytes == 0 ? "FLOPSCOPE_SPOOL_MB=0" : config_.spool_off_reason;
  return std::make_unique<TransportSink>(library, config_.target, identity_, gpu_status_,
                                         std::move(limits));
}

void Session::OnProcessExit() {
  // Runs on whichever thread called exit() (main returning, or any other thread), or on the
  // SIGTERM drain's thread. Threads still running may keep calling NVTX; what they record after
  // the final drain is not sent.
  static std::atomic<bool> ran{false};
  if (ran.exchange(true)) return;
  RunExitPath();
  exit_done_.store(true, std::memory_order_release);
}

void Session::RunExitPath() {
  if (disabled_.load(std::memory_order_acquire)) return;
  Session* session = Current();
  if (session == nullptr) return;
  // Idempotent: this is the tracer's own exit handler when that one has not run yet (the
  // session's handler was registered after the attach, as when InitializeInjection started it).
  if (session->tracing_ != nullptr) session->tracing_->FinishAtExit();
  if (session->exporter() == nullptr) return;
  // Every record made is now delivered, spooled (behind a final batch) or counted lost, unless
  // the exporter overran its bound: then the made-counts file stays, for the daemon's collector
  // to count what the store lacks.
  if (session->exporter()->Stop() && session->made_counts_ != nullptr) {
    session->made_counts_->Remove();
  }
  // Stop is bounded: an exporter that overran may still be inside its cycle. No CUPTI call may
  // follow, whatever it does next (exit goes on into CUDA's and libcupti's teardown).
  if (session->tracing_ != nullptr) session->tracing_->Abandon();
}

void Session::NameEndSignal(int signo) {
  Session* session = Current();
  if (session == nullptr || (signo != SIGTERM && signo != SIGINT)) return;
  // First in the made-counts file, which outlives a drain cut short (its bound, a second
  // signal): the daemon's collector then names the signal instead of guessing a kill.
  if (session->made_counts_ != nullptr) session->made_counts_->NameEndSignal(signo);
  try {
    session->tracker_.AppendMetadata(std::string(kEndSignalKey),
                                     signo == SIGINT ? "SIGINT" : "SIGTERM");
  } catch (...) {
    // Out of memory: the records still go; only the name of the signal is missing.
  }
}

void Session::DrainOnSigterm() {
  NameEndSignal(SigtermDrain::DrainedSignal());
  if (Session* session = Current(); session != nullptr && session->exporter() != nullptr) {
    session->exporter()->LimitExitTimeout(kSigtermAckWaitMs);
  }
  OnProcessExit();
  // Another thread may be in the exit path already (exit() came first): SIGTERM waits for it.
  // SigtermDrain bounds this wait like any other.
  while (!exit_done_.load(std::memory_order_acquire)) usleep(5000);
}

void Session::RearmTracingExit() noexcept {
  // Bounded: a process makes a plan and an evaluator per context and metric set, and each
  // registration is a few bytes in libc's list; past the cap the earlier ones still run.
  static std::atomic<int> registrations{0};
  if (registrations.fetch_add(1, std::memory_order_relaxed) >= kMaxTracingExitRearms) return;
  (void)std::atexit(&Session::OnTracingExit);
}

void Session::OnTracingExit() {
  if (disabled_.load(std::memory_order_acquire)) return;  // a forked child: nothing of ours
  Session* session = Current();
  if (session != nullptr && session->tracing_ != nullptr) session->tracing_->FinishAtExit();
}

void Session::OnForkChild() {
  // Only async-signal-safe work here: two atomic stores and a sigaction. NVTX calls in the child
  // then see no session and return at once; no exporter runs and nothing is flushed at the
  // child's exit; SIGTERM ends it as it would without the injector (no drain thread here).
  disabled_.store(true, std::memory_order_release);
  current_.store(nullptr, std::memory_order_release);
  SigtermDrain::ResetInForkChild();
}

}  // namespace flopscope::injector
