#include "daemon/ingest/spool_collector.h"

#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/made_counts_page.h"
#include "common/spool/spool_file.h"
#include "common/version.h"
#include "daemon/base/cpu_priority.h"
#include "daemon/base/logger.h"
#include "daemon/store/rank_store.h"
#include "daemon/validate/batch_validator.h"
#include "daemon/validate/hello_validator.h"

namespace flopscope::daemon {
namespace {

// Directories a glob pattern matches (unsorted).
std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> dirs;
  glob_t matches{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR | GLOB_NOSORT, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      std::string dir = matches.gl_pathv[i];
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();  // "dir/*/" gives "a/b/"
      dirs.push_back(std::move(dir));
    }
  }
  globfree(&matches);
  return dirs;
}

// `<dir>/<session>.made` beside `<dir>/<session>.spool` (common/made_counts_page.h).
std::string MadeCountsPathOf(const std::string& spool_path) {
  const std::string suffix = SpoolFile::kSuffix;
  return spool_path.substr(0, spool_path.size() - suffix.size()) + MadeCountsPage::kSuffix;
}

std::vector<std::string> MadeCountsFiles(const std::string& dir) {
  std::vector<std::string> files;
  glob_t matches{};
  const std::string pattern = dir + "/*" + MadeCountsPage::kSuffix;
  if (glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) files.emplace_back(matches.gl_pathv[i]);
  }
  globfree(&matches);
  return files;
}

// The hello of the session a made-counts file names (MadeSession holds the fields the injector
// knows before its transport starts); validated like any hello before it is used.
v1::SessionHello HelloOf(const MadeSession& made) {
  v1::SessionHello hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_session_id(made.session_id);
  hello.set_job_id(made.job_id);
  hello.set_rank(made.rank);
  hello.set_local_rank(made.local_rank);
  hello.set_world_size(made.world_size);
  v1::ParallelLayout* layout = hello.mutable_layout();
  layout->set_tp_size(made.tp_size);
  layout->set_pp_size(made.pp_size);
  layout->set_dp_size(made.dp_size);
  layout->set_tp_rank(made.tp_rank);
  layout->set_pp_rank(made.pp_rank);
  layout->set_dp_rank(made.dp_rank);
  layout->set_source(made.layout_source);
  hello.set_host(made.host);
  hello.set_pid(made.pid);
  hello.set_injector_version(made.injector_version);
  hello.set_start_time_ns(made.start_time_ns);
  hello.set_command(made.command);
  // A drain the process began and never finished: the signal is named, not guessed at.
  hello.set_gpu_status(
      made.end_signal == SIGINT    ? "unknown: the process was ended by SIGINT (Ctrl-C) before its "
                                     "transport started"
      : made.end_signal == SIGTERM ? "unknown: the process was ended by SIGTERM before its "
                                     "transport started"
                                   : "unknown: the process ended before its transport started");
  return hello;
}

}  // namespace

SpoolCollector::SpoolCollector(std::vector<std::string> patterns, Destinations destinations,
                               IngestPath* ingest, MayWrite may_write)
    : patterns_(std::move(patterns)),
      destinations_(std::move(destinations)),
      ingest_(ingest),
      may_write_(std::move(may_write)) {}

std::vector<SpoolCollector::Folder> SpoolCollector::MatchingFolders() const {
  std::vector<Folder> folders;
  for (const std::string& pattern : patterns_) {
    if (pattern.empty()) continue;  // --collect-spools ''
    for (const std::string& dir : Glob(pattern)) {
      if (destinations_.any) {
        for (std::string& folder : Glob(dir + "/*/")) folders.push_back({dir, std::move(folder)});
        continue;
      }
      for (const std::string& name : destinations_.names) {
        std::string folder = dir + "/" + name;
        struct stat st;
        if (lstat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
          folders.push_back({dir, std::move(folder)});
        }
      }
    }
  }
  std::sort(folders.begin(), folders.end(),
            [](const Folder& a, const Folder& b) { return a.path < b.path; });
  folders.erase(std::unique(folders.begin(), folders.end(),
                            [](const Folder& a, const Folder& b) { return a.path == b.path; }),
                folders.end());
  return folders;
}

SpoolCollector::~SpoolCollector() { Stop(); }

void SpoolCollector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void SpoolCollector::Nudge() {
  absl::MutexLock lock(&mu_);
  nudged_ = true;
}

SpooledRecords SpoolCollector::WaitingRecords() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

void SpoolCollector::Start(absl::Duration period) {
  thread_ = std::thread([this, period] { Loop(period); });
}

void SpoolCollector::Loop(absl::Duration period) {
  const ScopedThreadNice behind_queries(kBackgroundNice);  // cpu_priority.h
  while (true) {
    const Outcome outcome = CollectOnce();
    if (outcome.files > 0) {
      LogInfo("delivered ", outcome.files, " orphaned spool file(s): ", outcome.batches,
              " batches, ", outcome.records, " records");
    }
    absl::MutexLock lock(&mu_);
    const auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || nudged_; };
    mu_.AwaitWithTimeout(absl::Condition(&woken), period);
    if (stopping_) return;
    if (!nudged_) continue;
    // The ended process lets go of its spool a moment after its stream; a stop ends the wait.
    const auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stop), kNudgeSettle)) return;
    nudged_ = false;
  }
}

SpoolCollector::Outcome SpoolCollector::CollectOnce() {
  Outcome outcome;
  for (const Orphan& orphan : FindOrphans(&outcome)) {
    const absl::Status delivered = DeliverOrphan(orphan, &outcome);
    if (absl::IsCancelled(delivered)) return outcome;  // a stop: no more files this pass
    NoLongerWaiting(orphan);  // delivered, refused or gone: waiting no more
  }
  for (const Folder& folder : MatchingFolders()) {
    struct stat st;
    if (lstat(folder.path.c_str(), &st) == 0 && PrivateTo(folder, st.st_uid)) {
      CollectMadeCountsAlone(folder.path, st.st_uid, &outcome);
    }
  }
  return outcome;
}

std::vector<SpoolCollector::Orphan> SpoolCollector::FindOrphans(Outcome* outcome) {
  std::vector<Orphan> orphans;
  SpooledRecords waiting;
  for (const Folder& folder : MatchingFolders()) {
    const std::string& dir = folder.path;
    struct stat st;
    const bool dir_private = lstat(dir.c_str(), &st) == 0 && PrivateTo(folder, st.st_uid);
    const uid_t dir_owner = dir_private ? st.st_uid : 0;
    if (dir_private) {
      SpoolFile::RemoveAbandonedCopies(dir);  // what a compaction left when SIGKILL cut it short
    }
    for (const std::string& path : SpoolFile::List(dir)) {
      // An empty orphan of the directory's owner (SpoolFile::RemoveEmptyOrphan) goes, said once.
      if (dir_private && SpoolFile::RemoveEmptyOrphan(path, dir_owner, kEmptyOrphanAgeS)) {
        LogInfo("removed ", path, ": an empty spool file its process left before writing into it",
                " (only an older injector leaves one)");
        ++outcome->emptied;
        continue;
      }
      uid_t owner = 0;
      std::string error;
      std::unique_ptr<SpoolFile> file = SpoolFile::OpenOrphanOfAnyOwner(path, &owner, &error);
      if (file == nullptr) {
        if (!error.empty()) NoteRefusal(path, error);  // else its process still lives
        continue;
      }
      std::string problem = FolderProblem(folder, owner);
      if (problem.empty()) problem = PredatesOwner(path, owner);
      if (!problem.empty()) {
        ++outcome->refused;
        NoteRefusal(path, problem);
        continue;
      }
      const v1::SessionHello& hello = file->hello().hello();
      Orphan orphan{folder, path, hello.job_id(), hello.rank(), 0};
      for (const SpoolFile::Entry& entry : file->entries()) orphan.records += entry.records;
      waiting[orphan.job_id][orphan.rank] += orphan.records;
      orphans.push_back(std::move(orphan));
    }  // the file closes: its lock is free again until DeliverOrphan takes it
  }
  absl::MutexLock lock(&mu_);
  waiting_ = std::move(waiting);
  return orphans;
}

absl::Status SpoolCollector::DeliverOrphan(const Orphan& orphan, Outcome* outcome) {
  uid_t owner = 0;
  std::string error;
  std::unique_ptr<SpoolFile> file = SpoolFile::OpenOrphanOfAnyOwner(orphan.path, &owner, &error);
  if (file == nullptr || !PrivateTo(orphan.folder, owner)) {
    // Taken meanwhile (a concurrent pass), or replaced: the next pass looks again.
    return absl::NotFoundError(error);
  }
  if (absl::Status s = Deliver(*file, owner, outcome); !s.ok()) {
    if (absl::IsCancelled(s)) return s;
    ++outcome->refused;
    NoteRefusal(orphan.path, s.message());
    return s;
  }
  file->Remove();
  unlink(MadeCountsPathOf(orphan.path).c_str());  // read by Deliver, if there was one
  ++outcome->files;
  return absl::OkStatus();
}

void SpoolCollector::NoLongerWaiting(const Orphan& orphan) {
  absl::MutexLock lock(&mu_);
  const auto job = waiting_.find(orphan.job_id);
  if (job == waiting_.end()) return;
  const auto rank = job->second.find(orphan.rank);
  if (rank == job->second.end()) return;
  rank->second -= std::min(rank->second, orphan.records);
  if (rank->second == 0) job->second.erase(rank);
  if (job->second.empty()) waiting_.erase(job);
}

void SpoolCollector::CollectMadeCountsAlone(const std::string& dir, uid_t owner, Outcome* outcome) {
  for (const std::string& path : MadeCountsFiles(dir)) {
    const std::string stem = path.substr(0, path.size() - std::strlen(MadeCountsPage::kSuffix));
    struct stat st;
    if (lstat((stem + SpoolFile::kSuffix).c_str(), &st) == 0) continue;  // its spool's turn
    uid_t file_owner = 0;
    uint64_t made = 0;
    MadeSession named;
    std::string error;
    if (!MadeCountsPage::ReadOrphan(path, &file_owner, &made, &named, &error)) {
      if (!error.empty()) NoteRefusal(path, error);  // else its process still lives
      continue;
    }
    if (file_owner != owner) {
      NoteRefusal(path,
                  absl::StrCat("owned by uid ", file_owner, ", its directory by uid ", owner));
      continue;
    }
    if (!named.known()) {
      LogInfo("removed ", path, ": its process ended before writing a batch; the ", made,
              " records it made are counted nowhere (the file names no session)");
      unlink(path.c_str());
      continue;
    }
    // The process ended before its transport made a spool (or the user's next process replayed
    // it): what the store lacks of what it made is charged to its session as killed.
    v1::SessionHello hello = HelloOf(named);
    StreamTally tally;
    tally.made_known = true;
    tally.made = made;
    tally.end_signal = named.end_signal;
    absl::StatusOr<IngestPath::Session> session = OpenOrphanSession(&hello, owner);
    absl::Status status = session.status();
    if (status.ok()) status = ingest_->End(*session, tally);
    if (!status.ok()) {
      ++outcome->refused;
      NoteRefusal(path, status.message());
      continue;
    }
    LogInfo("charged ", path, " (", made, " records made, no spool) to ", DescribeSession(hello),
            ": what its store lacks is counted as killed");
    unlink(path.c_str());
    ++outcome->made_alone;
  }
}

bool SpoolCollector::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool SpoolCollector::PrivateTo(const Folder& folder, uid_t owner) {
  return FolderProblem(folder, owner).empty();
}

std::string SpoolCollector::FolderProblem(const Folder& folder, uid_t owner) {
  if (std::string problem = DirectoryProblem(folder.spool_dir, owner); !problem.empty()) {
    return problem;
  }
  struct stat st;
  if (lstat(folder.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != owner ||
      (st.st_mode & 022) != 0) {
    return absl::StrCat(folder.path, " is not a directory of uid ", owner,
                        " that only it may write");
  }
  return "";
}

std::string SpoolCollector::DirectoryProblem(const std::string& dir, uid_t owner) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != owner ||
      (st.st_mode & 022) != 0) {
    return absl::StrCat(dir, " is not a directory of uid ", owner, " that only it may write");
  }
  // Hazard: anyone may create /var/tmp/flopscope-spool-<uid> for another uid; what is in it is
  // the creator's, never the named user's.
  if (const std::optional<uid_t> named = UidNamedBy(dir); named.has_value() && *named != owner) {
    return absl::StrCat(dir, " names uid ", *named, " but belongs to uid ", owner);
  }
  // A uid without a user: its files would go to whoever is given that uid next.
  if (!HomeOf(owner).has_value()) {
    return absl::StrCat("uid ", owner, ", the owner of ", dir,
                        ", has no passwd entry (a deleted user?): its spools are left alone");
  }
  return "";
}

std::optional<uid_t> SpoolCollector::UidNamedBy(const std::string& dir) {
  constexpr absl::string_view kPrefix = "flopscope-spool-";
  absl::string_view path(dir);
  while (absl::ConsumeSuffix(&path, "/")) {
  }
  const size_t slash = path.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  absl::string_view digits;
  if (absl::ConsumePrefix(&base, kPrefix)) {
    digits = base.substr(0, base.find('-'));  // flopscope-spool-<uid>[-<fallback suffix>]
  } else if (base == "flopscope-spool" && slash != absl::string_view::npos) {
    absl::string_view parent = path.substr(0, slash);  // $XDG_RUNTIME_DIR: /run/user/<uid>
    if (!absl::ConsumePrefix(&parent, "/run/user/")) return std::nullopt;
    digits = parent;
  } else {
    return std::nullopt;
  }
  uint32_t uid = 0;
  if (!absl::SimpleAtoi(digits, &uid)) return std::nullopt;
  return static_cast<uid_t>(uid);
}

std::optional<std::string> SpoolCollector::HomeOf(uid_t uid) {
  struct passwd entry;
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return std::string(found->pw_dir != nullptr ? found->pw_dir : "");
}

std::string SpoolCollector::PredatesOwner(const std::string& path, uid_t owner) {
  const std::optional<std::string> home = HomeOf(owner);
  if (!home.has_value() || home->empty()) return "";
  struct statx made;
  struct stat file;
  if (statx(AT_FDCWD, home->c_str(), 0, STATX_BTIME, &made) != 0 ||
      (made.stx_mask & STATX_BTIME) == 0 || lstat(path.c_str(), &file) != 0) {
    return "";  // no birth time known: nothing to compare
  }
  if (file.st_mtim.tv_sec >= made.stx_btime.tv_sec) return "";
  return absl::StrCat("last written before uid ", owner, "'s home ", *home,
                      " was made: left by an earlier user of that uid? (left alone)");
}

absl::StatusOr<IngestPath::Session> SpoolCollector::OpenOrphanSession(v1::SessionHello* hello,
                                                                      uid_t owner) {
  if (absl::Status s = ValidateHello(*hello); !s.ok()) return s;
  // The job id the owner's records go to: the hello's, or the run kept apart from another
  // user's job of that id, as the live stream's were.
  absl::StatusOr<std::string> stored = may_write_(owner, hello->job_id());
  if (!stored.ok()) return stored.status();
  hello->set_job_id(*std::move(stored));
  return ingest_->Open(*hello);
}

absl::Status SpoolCollector::Deliver(const SpoolFile& file, uid_t owner, Outcome* outcome) {
  v1::SessionHello hello = file.hello().hello();  // outlives the session, as Open asks
  absl::StatusOr<IngestPath::Session> session = OpenOrphanSession(&hello, owner);
  if (!session.ok()) return session.status();
  StreamTally tally;
  absl::Status status;
  v1::UpMessage message;
  for (const SpoolFile::Entry& entry : file.entries()) {
    if (Stopping()) {  // the file stays; the next start resumes after the committed seq
      status = absl::CancelledError("the daemon is stopping");
      break;
    }
    if (entry.seq <= session->committed_seq) continue;  // the daemon has it
    if (!file.Read(entry, &message)) {
      status = absl::DataLossError(absl::StrCat("batch seq ", entry.seq, " cannot be read"));
      break;
    }
    if (!message.has_batch()) continue;
    absl::StatusOr<CommitOutcome> committed = ingest_->Commit(*session, message.batch(), &tally);
    // A rejected batch is counted as a stream's is; the file's later batches are still tried.
    if (absl::IsInvalidArgument(committed.status())) continue;
    status = committed.status();
    if (!status.ok()) break;  // disk full, I/O: the file stays for the next pass
    if (committed->duplicate) continue;
    ++outcome->batches;
    outcome->records += ProducerRecordCount(message.batch());
  }
  // Only once the whole file is in: a stop or a failure midway would count its rest as killed.
  if (status.ok()) ReadMadeCounts(file.path(), owner, &tally);
  if (absl::Status s = ingest_->End(*session, tally); !s.ok() && status.ok()) status = s;
  return status;
}

void SpoolCollector::ReadMadeCounts(const std::string& spool_path, uid_t owner,
                                    StreamTally* tally) {
  const std::string path = MadeCountsPathOf(spool_path);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return;  // a clean exit removed it, or there never was one
  uid_t file_owner = 0;
  MadeSession named;  // the spool's hello names the session already; the file adds its end signal
  std::string error;
  if (!MadeCountsPage::ReadOrphan(path, &file_owner, &tally->made, &named, &error)) {
    NoteRefusal(path, error.empty() ? "its writer still holds it" : error);
    return;
  }
  if (file_owner != owner) {
    NoteRefusal(path, absl::StrCat("owned by uid ", file_owner, ", its spool by uid ", owner));
    return;
  }
  tally->made_known = true;
  tally->end_signal = named.end_signal;
}

void SpoolCollector::NoteRefusal(const std::string& path, absl::string_view why) {
  {
    absl::MutexLock lock(&mu_);
    if (!refused_.insert(path).second) return;  // said already
  }
  LogWarning("orphaned spool ", path, " left in place: ", why);
}

}  // namespace flopscope::daemon
