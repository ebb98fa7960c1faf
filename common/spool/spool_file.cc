#include "common/spool/spool_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>

#include "common/spool_dir.h"

namespace flopscope {
namespace {

constexpr char kMagic[8] = {'F', 'S', 'S', 'P', 'O', 'O', 'L', '1'};
constexpr size_t kFrameHeader = 4 + 8 + 8;
static_assert(SpoolFile::FrameBytes(0) == kFrameHeader);
// A frame longer than this is corruption, not a batch (gRPC messages are capped well below).
constexpr uint32_t kMaxFrame = 64u << 20;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Session ids are ours (identity.cc), but a file name must never leave the directory.
std::string FileName(const std::string& session_id) {
  return SessionFileStem(session_id) + SpoolFile::kSuffix;
}

bool PwriteAll(int fd, const void* data, size_t size, uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

void EncodeHeader(uint32_t length, uint64_t seq, uint64_t records, char* header) {
  std::memcpy(header, &length, 4);
  std::memcpy(header + 4, &seq, 8);
  std::memcpy(header + 12, &records, 8);
}

// Whether `fd` is still the file `path` names: a compaction renames a new file over it.
bool StillNamed(int fd, const std::string& path) {
  struct stat held, named;
  return fstat(fd, &held) == 0 && lstat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
         held.st_dev == named.st_dev;
}

bool PreadAll(int fd, void* data, size_t size, uint64_t offset) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace

bool SpoolFile::PrepareDirectory(const std::string& dir, std::string* error) {
  return PrepareSpoolDirectory(dir, error);
}

std::unique_ptr<SpoolFile> SpoolFile::Create(const std::string& dir, const v1::UpMessage& hello,
                                             uint64_t max_bytes, std::string* error) {
  const std::string path = dir + "/" + FileName(hello.hello().session_id());
  // Written and locked under the copy's name, then renamed into place (as Compact does): the
  // spool's own name never names a file that is unlocked or short of its hello. Opened under
  // its own name and locked after, a collector scanning the directory in between took the lock
  // first: the process went on without a spool, and an empty file stayed behind for good (64
  // ranks on 2 cores, 2026-11-26). The remover of abandoned copies may hold the copy's lock for
  // a moment (it then unlinks it): a few more tries.
  for (int attempt = 0; attempt < kCreateAttempts; ++attempt) {
    if (attempt > 0) usleep(kCreateRetryMicros);
    bool retry = false;
    std::unique_ptr<SpoolFile> file = CreateOnce(path, hello, max_bytes, &retry, error);
    if (file != nullptr || !retry) return file;
  }
  return nullptr;
}

std::unique_ptr<SpoolFile> SpoolFile::CreateOnce(const std::string& path,
                                                 const v1::UpMessage& hello, uint64_t max_bytes,
                                                 bool* retry, std::string* error) {
  const std::string copy = path + kCopySuffix;
  const int fd = open(copy.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *error = Errno("cannot open " + copy);
    return nullptr;
  }
  // Held until close: tells other processes that this spool has a live owner.
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    *retry = errno == EWOULDBLOCK;
    *error = Errno("cannot lock " + copy);
    close(fd);
    return nullptr;
  }
  std::unique_ptr<SpoolFile> file(new SpoolFile(fd, copy, max_bytes));
  // Cut only once it is ours: what an abandoned copy held is nobody's.
  if (ftruncate(fd, 0) != 0 || !PwriteAll(fd, kMagic, sizeof kMagic, 0)) {
    *error = Errno("cannot write " + copy);
    file->Remove();
    return nullptr;
  }
  file->end_ = sizeof kMagic;
  file->hello_ = hello;
  if (!file->WriteFrame(0, 0, hello, nullptr)) {
    *error = Errno("cannot write " + copy);
    file->Remove();
    return nullptr;
  }
  // Unlinked by the remover before our lock: this inode is nobody's file.
  if (!StillNamed(fd, copy)) {
    *error = copy + " was removed while it was written";
    *retry = true;
    return nullptr;
  }
  if (rename(copy.c_str(), path.c_str()) != 0) {
    *error = Errno("cannot rename " + copy + " to " + path);
    file->Remove();
    return nullptr;
  }
  file->path_ = path;
  file->hello_end_ = file->end_;
  return file;
}

std::unique_ptr<SpoolFile> SpoolFile::OpenOrphan(const std::string& path, std::string* error) {
  uid_t owner = 0;
  std::unique_ptr<SpoolFile> file = OpenOrphanOfAnyOwner(path, &owner, error);
  if (file != nullptr && owner != geteuid()) {
    *error = path + " is not a spool file of uid " + std::to_string(geteuid());
    return nullptr;
  }
  return file;
}

std::unique_ptr<SpoolFile> SpoolFile::OpenOrphanOfAnyOwner(const std::string& path, uid_t* owner,
                                                           std::string* error) {
  error->clear();
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *error = Errno("cannot open " + path);
    return nullptr;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {  // its process still lives (or another replays it)
    close(fd);
    return nullptr;
  }
  // Hazard: a compaction may have renamed a new file over the path between our open and our
  // lock; the inode we hold is then the old copy, and removing "it" would unlink the new one.
  if (!StillNamed(fd, path)) {
    close(fd);
    return nullptr;
  }
  struct stat st;
  std::unique_ptr<SpoolFile> file(new SpoolFile(fd, path, 0));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + " is not a regular file";
    return nullptr;
  }
  *owner = st.st_uid;
  if (!file->Scan(error)) return nullptr;
  return file;
}

std::vector<std::string> SpoolFile::List(const std::string& dir) {
  std::vector<std::string> paths;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return paths;
  const std::string suffix = kSuffix;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      paths.push_back(dir + "/" + name);
    }
  }
  closedir(d);
  std::sort(paths.begin(), paths.end());
  return paths;
}

size_t SpoolFile::RemoveAbandonedCopies(const std::string& dir) {
  size_t removed = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  const std::string suffix = std::string(kSuffix) + kCopySuffix;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string path = dir + "/" + name;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    // A copy being written is locked by its process; a locked one is left alone. (If we win
    // the race before its writer locks it, the writer's rename fails and it keeps its file.)
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && StillNamed(fd, path) && unlink(path.c_str()) == 0) {
      ++removed;
    }
    close(fd);
  }
  closedir(d);
  return removed;
}

bool SpoolFile::RemoveEmptyOrphan(const std::string& path, uid_t owner, int64_t min_age_s) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st;
  char head[sizeof kMagic] = {};
  const bool empty = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == owner &&
                     st.st_size >= 0 && static_cast<size_t>(st.st_size) <= sizeof kMagic &&
                     time(nullptr) - st.st_mtime >= min_age_s &&
                     PreadAll(fd, head, static_cast<size_t>(st.st_size), 0) &&
                     std::memcmp(head, kMagic, static_cast<size_t>(st.st_size)) == 0;
  // Hazard: the lock, then the name, as in OpenOrphanOfAnyOwner: a file still held by its
  // process, or replaced at its name since our open, is not the one we looked at.
  const bool removed = empty && flock(fd, LOCK_EX | LOCK_NB) == 0 && StillNamed(fd, path) &&
                       unlink(path.c_str()) == 0;
  close(fd);
  return removed;
}

SpoolFile::SpoolFile(int fd, std::string path, uint64_t max_bytes)
    : fd_(fd), path_(std::move(path)), max_bytes_(max_bytes) {}

SpoolFile::~SpoolFile() {
  if (fd_ >= 0) close(fd_);
}

bool SpoolFile::WriteFrame(uint64_t seq, uint64_t records, const v1::UpMessage& message,
                           Entry* entry) {
  const size_t size = message.ByteSizeLong();
  if (size > kMaxFrame) return false;
  const uint32_t length = static_cast<uint32_t>(size);
  char header[kFrameHeader];
  EncodeHeader(length, seq, records, header);
  if (!PwriteAll(fd_, header, sizeof header, end_)) return false;
  if (lseek(fd_, static_cast<off_t>(end_ + sizeof header), SEEK_SET) < 0) return false;
  {
    // Straight into the file through an 8 KiB buffer: a batch of megabytes is not copied.
    google::protobuf::io::FileOutputStream out(fd_);
    if (!message.SerializeToZeroCopyStream(&out) || !out.Flush() ||
        static_cast<uint64_t>(out.ByteCount()) != size) {
      return false;
    }
  }
  if (entry != nullptr) *entry = Entry{seq, end_ + sizeof header, length, records};
  end_ += sizeof header + size;
  return true;
}

bool SpoolFile::Append(uint64_t seq, const v1::UpMessage& batch, uint64_t records, Entry* entry) {
  if (end_ + kFrameHeader + batch.ByteSizeLong() > max_bytes_) return false;
  if (!WriteFrame(seq, records, batch, entry)) {
    // Hazard: a half-written frame must not stay before later ones; cut it off.
    if (ftruncate(fd_, static_cast<off_t>(end_)) != 0) end_ = max_bytes_;  // stop appending
    return false;
  }
  return true;
}

bool SpoolFile::AppendLast(uint64_t seq, const v1::UpMessage& batch) {
  if (end_ + kFrameHeader + batch.ByteSizeLong() > max_bytes_ + kExitSlack) return false;
  if (!WriteFrame(seq, 0, batch, nullptr)) {
    if (ftruncate(fd_, static_cast<off_t>(end_)) != 0) end_ = max_bytes_ + kExitSlack;
    return false;
  }
  return true;
}

bool SpoolFile::Read(const Entry& entry, v1::UpMessage* out) const {
  std::string payload(entry.length, '\0');
  return PreadAll(fd_, payload.data(), payload.size(), entry.offset) &&
         out->ParseFromString(payload);
}

void SpoolFile::Reset() {
  if (end_ == hello_end_) return;
  if (ftruncate(fd_, static_cast<off_t>(hello_end_)) == 0) end_ = hello_end_;
}

bool SpoolFile::CopyFrames(int fd, const std::vector<Entry*>& live,
                           std::vector<Entry>* moved) const {
  std::string prefix(hello_end_, '\0');  // magic and hello, copied as they are
  if (!PreadAll(fd_, prefix.data(), prefix.size(), 0) ||
      !PwriteAll(fd, prefix.data(), prefix.size(), 0)) {
    return false;
  }
  uint64_t offset = hello_end_;
  std::string frame;
  for (const Entry* entry : live) {
    frame.resize(kFrameHeader + entry->length);
    EncodeHeader(entry->length, entry->seq, entry->records, frame.data());
    if (!PreadAll(fd_, frame.data() + kFrameHeader, entry->length, entry->offset) ||
        !PwriteAll(fd, frame.data(), frame.size(), offset)) {
      return false;
    }
    moved->push_back(Entry{entry->seq, offset + kFrameHeader, entry->length, entry->records});
    offset += frame.size();
  }
  return true;
}

bool SpoolFile::Compact(const std::vector<Entry*>& live) {
  const std::string copy = path_ + kCopySuffix;
  unlink(copy.c_str());  // one our own earlier compaction left (it died with its process)
  const int fd = open(copy.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  // Locked before the rename, so that the path never names an unlocked file of a live session.
  std::vector<Entry> moved;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 || !CopyFrames(fd, live, &moved) ||
      rename(copy.c_str(), path_.c_str()) != 0) {
    unlink(copy.c_str());
    close(fd);
    return false;
  }
  close(fd_);  // the old inode: unlinked by the rename, its lock goes with it
  fd_ = fd;
  end_ = hello_end_;
  for (size_t i = 0; i < live.size(); ++i) {
    *live[i] = moved[i];
    end_ = moved[i].offset + moved[i].length;
  }
  return true;
}

void SpoolFile::Remove() {
  if (!removed_) unlink(path_.c_str());
  removed_ = true;
}

bool SpoolFile::Scan(std::string* error) {
  char magic[sizeof kMagic];
  if (!PreadAll(fd_, magic, sizeof magic, 0) || std::memcmp(magic, kMagic, sizeof magic) != 0) {
    *error = path_ + " is not a flopscope spool file";
    return false;
  }
  uint64_t offset = sizeof kMagic;
  std::map<uint64_t, Entry> by_seq;
  bool have_hello = false;
  char header[kFrameHeader];
  while (PreadAll(fd_, header, sizeof header, offset)) {
    Entry entry;
    std::memcpy(&entry.length, header, 4);
    std::memcpy(&entry.seq, header + 4, 8);
    std::memcpy(&entry.records, header + 12, 8);
    entry.offset = offset + sizeof header;
    if (entry.length > kMaxFrame) break;
    char last;
    if (entry.length > 0 && !PreadAll(fd_, &last, 1, entry.offset + entry.length - 1)) break;
    if (!have_hello) {
      if (entry.seq != 0 || !Read(entry, &hello_) || !hello_.has_hello()) break;
      have_hello = true;
      hello_end_ = entry.offset + entry.length;
    } else if (entry.seq != 0) {
      by_seq[entry.seq] = entry;  // a later frame of the same seq wins
    }
    offset = entry.offset + entry.length;
  }
  if (!have_hello) {
    *error = path_ + " has no hello";
    return false;
  }
  for (const auto& [seq, entry] : by_seq) entries_.push_back(entry);
  end_ = offset;
  return true;
}

}  // namespace flopscope
