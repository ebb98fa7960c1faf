#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/ingest/ingest_path.h"
#include "daemon/query/spooled_records.h"
#include "daemon/store/rank_store.h"

namespace flopscope {
class SpoolFile;
}

namespace flopscope::daemon {

// Collects orphaned spool files (common/spool/spool_file.h): the batches a process could
// not deliver before it ended, which otherwise wait for the same user's next injected process.
// A spool directory holds one folder per daemon address its sessions were aimed at
// (common/spool_dir.h, SpoolDestinationName); the collector looks only in the folders of its
// `destinations` (its own socket and TCP address, and those named by --collect-spools-for), so a
// spool meant for another daemon is never stored here. At start and then periodically, every
// `*.spool` file in those folders of the directories the patterns match whose lock is free (its
// process is gone) is ingested through the same IngestPath as a stream's
// batches (ingest_path.h: validated, deduplicated by (session, seq), the disk reserve checked
// per batch, the catalog, metrics and forwarder told), the session's end is recorded as a
// stream's would be (a file without a final batch leaves the session flagged), and the file is
// removed. The made-counts file beside it (`<session>.made`,
// common/made_counts_page.h), when its owner left one, says how many records the process made:
// EndStream counts those neither stored nor counted lost as LOSS_CAUSE_KILLED, and the file is
// removed with the spool. One without a spool (the process died before its transport made one,
// or the user's next process replayed its spool) is charged to the session the file names (its
// hello rebuilt from the file, validated and checked like a spool's): the session is opened,
// created when the store never saw it, and ended as a spool's would be; then the file is
// removed. A file that names no session (none was written) is removed, its count logged.
//
// Records waiting: a pass first counts, per job and rank, the records of the orphans it is about
// to deliver, and takes each file's off as it is delivered (WaitingRecords), so that `jobs`,
// `ranks` and `report` say they wait instead of counting them lost (daemon/query/
// spooled_records.h). A stream that ends without its final batch usually left a spool: Nudge
// runs a pass at once (kNudgeSettle later) rather than at the next period.
//
// Untrusted input: the file's bytes, and who wrote it. A file counts as written by its owner
// uid, and only in a folder that uid owns and no one else may write (mode without 022), in a
// spool directory of the same kind, whose
// name, when it names a uid (/var/tmp/flopscope-spool-<uid>[-*], /run/user/<uid>/...), names that
// one: anyone may create another uid's directory first. The uid must have a passwd entry (a
// deleted user's files are never handed to the next owner of its uid), and a spool file last
// written before its owner's home directory was made is an earlier user's (DirectoryProblem,
// PredatesOwner). It is taken only for a job that uid may write (`may_write`, the access model's
// check). A file refused is left where it is and named in the log once.
//
// Thread-safe: CollectOnce may run on the collector's thread and in tests at the same time
// (the files' locks keep them apart).
class SpoolCollector {
 public:
  // The job id `uid`'s records of `job_id` are stored under (AccessControl::ClaimForWrite), or
  // why they may not be.
  using MayWrite = std::function<absl::StatusOr<std::string>(uid_t uid, const std::string& job_id)>;
  struct Outcome {
    uint64_t files = 0;       // delivered and removed
    uint64_t batches = 0;     // committed (duplicates not)
    uint64_t records = 0;     // in those batches
    uint64_t refused = 0;     // files left in place: not allowed, damaged, or the store refused
    uint64_t made_alone = 0;  // made-counts files without a spool charged to their sessions
    uint64_t emptied = 0;     // orphans holding no record, removed (SpoolFile::RemoveEmptyOrphan)
  };

  // How long an orphan holding no record must have been left before it is removed
  // (SpoolFile::RemoveEmptyOrphan): a live old injector writes its magic within moments of creating
  // it.
  static constexpr int64_t kEmptyOrphanAgeS = 60;
  // How long a nudged pass waits: a stream ends as its process exits, and the spool's lock goes
  // with the process a moment later.
  static constexpr absl::Duration kNudgeSettle = absl::Milliseconds(300);

  // The folders of a spool directory this daemon delivers: those named (SpoolDestinationName of
  // each address), or every one (`any`: --collect-spools-for '*').
  struct Destinations {
    std::vector<std::string> names;
    bool any = false;
  };

  // `ingest` outlives the collector.
  SpoolCollector(std::vector<std::string> patterns, Destinations destinations, IngestPath* ingest,
                 MayWrite may_write);
  ~SpoolCollector();  // Stop()

  // One pass over every matching directory.
  Outcome CollectOnce() ABSL_LOCKS_EXCLUDED(mu_);
  // A pass now, then one every `period` (and after each Nudge) on a thread of its own until
  // Stop.
  void Start(absl::Duration period) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the thread, between two batches of a delivery; later Nudges do nothing.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Asks the thread for a pass soon (a stream ended without its final batch). Cheap; nudges
  // before the pass starts count once.
  void Nudge() ABSL_LOCKS_EXCLUDED(mu_);
  // The records of the orphans the current pass has yet to deliver, per job and rank: every batch
  // of each file, so a file a stopped pass half delivered counts whole (the query side never
  // moves more out of a rank's losses than they hold). Files are read twice a pass, to count and
  // to deliver: holding them open between would hold a descriptor and a lock per orphan.
  SpooledRecords WaitingRecords() const ABSL_LOCKS_EXCLUDED(mu_);

  // A destination's folder (`path`) in a spool directory the patterns matched (`spool_dir`).
  struct Folder {
    std::string spool_dir;
    std::string path;
  };

  // The ownership rules, public for their tests.
  // Why `folder` is not one of `owner`'s, or "": its spool directory must pass DirectoryProblem,
  // and the folder itself be a directory `owner` owns that no one else may write.
  static std::string FolderProblem(const Folder& folder, uid_t owner);
  // Why `dir` is no spool directory of `owner`'s, or "": it must be a directory `owner` owns that
  // no one else may write; the uid its name gives (UidNamedBy) must be `owner`; and `owner` must
  // be a user (a passwd entry), not the uid of a deleted one.
  static std::string DirectoryProblem(const std::string& dir, uid_t owner);
  // The uid a spool directory's path names: /var/tmp/flopscope-spool-<uid>, the injector's
  // fallback /var/tmp/flopscope-spool-<uid>-<suffix>, /run/user/<uid>/flopscope-spool; nullopt
  // for any other (a --collect-spools directory of its own).
  static std::optional<uid_t> UidNamedBy(const std::string& dir);
  // The home directory of `uid`'s passwd entry, nullopt without one.
  static std::optional<std::string> HomeOf(uid_t uid);
  // Why the spool file `path` of `owner` is not delivered as theirs, or "": last written before
  // the owner's home directory was made (its birth time, where the filesystem keeps one), it was
  // left by an earlier user of a reused uid.
  static std::string PredatesOwner(const std::string& path, uid_t owner);

 private:
  // Delivers one orphan owned by `owner`; adds to *outcome.
  absl::Status Deliver(const SpoolFile& file, uid_t owner, Outcome* outcome);
  // The records the spool's process made, from the made-counts file beside it, into *tally
  // (left unknown when there is none, or it is not one `owner` left).
  void ReadMadeCounts(const std::string& spool_path, uid_t owner, StreamTally* tally)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Charges the made-counts files of `dir` without a spool whose process is gone to the sessions
  // they name, and removes them; adds to *outcome.
  void CollectMadeCountsAlone(const std::string& dir, uid_t owner, Outcome* outcome)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Opens the session of an orphan's `hello` (which must outlive it) for ingest, once it is valid
  // and `owner` may write; sets its job id to the one the records are stored under.
  absl::StatusOr<IngestPath::Session> OpenOrphanSession(v1::SessionHello* hello, uid_t owner);
  // Whether `folder` is one only `owner` may write (FolderProblem says nothing).
  static bool PrivateTo(const Folder& folder, uid_t owner);
  // The destinations' folders in the directories the patterns match, sorted, without repeats.
  std::vector<Folder> MatchingFolders() const;
  void NoteRefusal(const std::string& path, absl::string_view why) ABSL_LOCKS_EXCLUDED(mu_);
  // True once the destructor asked the thread to end: a replay stops between two batches.
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_);
  void Loop(absl::Duration period) ABSL_LOCKS_EXCLUDED(mu_);

  const std::vector<std::string> patterns_;
  const Destinations destinations_;
  IngestPath* const ingest_;
  const MayWrite may_write_;
  // Finds the orphans of a pass and counts their records into waiting_.
  struct Orphan {
    Folder folder;
    std::string path;
    std::string job_id;
    int32_t rank = 0;
    uint64_t records = 0;
  };
  std::vector<Orphan> FindOrphans(Outcome* outcome) ABSL_LOCKS_EXCLUDED(mu_);
  // Delivers one orphan found by FindOrphans (reopened: its lock may have gone meanwhile).
  // CANCELLED: the daemon is stopping.
  absl::Status DeliverOrphan(const Orphan& orphan, Outcome* outcome);
  void NoLongerWaiting(const Orphan& orphan) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool nudged_ ABSL_GUARDED_BY(mu_) = false;
  SpooledRecords waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> refused_ ABSL_GUARDED_BY(mu_);  // logged once each
  std::thread thread_;
};

}  // namespace flopscope::daemon
