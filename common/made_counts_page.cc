// The made-counts file: creation and mapping for the writer, parsing for the collector.

#include "common/made_counts_page.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "common/utf8.h"

namespace flopscope {
namespace {

static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
              std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
              std::atomic<uint32_t>::is_always_lock_free);

// The header: magic, slot count, session length, end signal, zeros.
constexpr size_t kEndSignalOffset = sizeof MadeCountsPage::kMagic + 2 * sizeof(uint32_t);
constexpr size_t kHeaderUsed = kEndSignalOffset + sizeof(uint32_t);

std::string ErrnoText(const char* what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

// Sizes the new file and maps it; nullptr (the file removed) on failure.
char* SizeAndMap(int fd, const std::string& path, std::string* error) {
  if (ftruncate(fd, MadeCountsPage::kFileBytes) != 0) {
    *error = ErrnoText("cannot size", path);
    return nullptr;
  }
  void* map = mmap(nullptr, MadeCountsPage::kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    *error = ErrnoText("cannot map", path);
    return nullptr;
  }
  return static_cast<char*>(map);
}

// The session's fixed-size fields, in the file's order.
constexpr size_t kSessionFixedBytes =
    3 * sizeof(int32_t) + 6 * sizeof(uint32_t) + 2 * sizeof(int64_t);
// No single string may take more than this, so the others always fit beside it (the command may
// take what they leave).
constexpr size_t kMaxSessionString = 1024;

template <typename T>
void Put(T value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof value);
}

void PutString(std::string text, size_t max_bytes, std::string* out) {
  TruncateUtf8(max_bytes, &text);
  Put(static_cast<uint32_t>(text.size()), out);
  out->append(text);
}

// Reads the encoded session; false with *error when it overruns `size` or leaves bytes over.
class SessionReader {
 public:
  SessionReader(const char* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  bool Get(T* value) {
    if (size_ - offset_ < sizeof *value) return false;
    std::memcpy(value, data_ + offset_, sizeof *value);
    offset_ += sizeof *value;
    return true;
  }
  bool GetString(std::string* text) {
    uint32_t length = 0;
    if (!Get(&length) || size_ - offset_ < length) return false;
    text->assign(data_ + offset_, length);
    offset_ += length;
    return true;
  }
  bool AtEnd() const { return offset_ == size_; }

 private:
  const char* const data_;
  const size_t size_;
  size_t offset_ = 0;
};

bool DecodeSession(const char* data, size_t size, MadeSession* out) {
  SessionReader in(data, size);
  MadeSession s;
  const bool ok = in.Get(&s.rank) && in.Get(&s.local_rank) && in.Get(&s.world_size) &&
                  in.Get(&s.tp_size) && in.Get(&s.pp_size) && in.Get(&s.dp_size) &&
                  in.Get(&s.tp_rank) && in.Get(&s.pp_rank) && in.Get(&s.dp_rank) &&
                  in.Get(&s.pid) && in.Get(&s.start_time_ns) && in.GetString(&s.session_id) &&
                  in.GetString(&s.job_id) && in.GetString(&s.host) &&
                  in.GetString(&s.injector_version) && in.GetString(&s.layout_source) &&
                  in.GetString(&s.command) && in.AtEnd() && s.known();
  if (ok) *out = std::move(s);
  return ok;
}

}  // namespace

std::string EncodeMadeSession(const MadeSession& session) {
  std::string out;
  for (int32_t value : {session.rank, session.local_rank, session.world_size}) Put(value, &out);
  for (uint32_t value : {session.tp_size, session.pp_size, session.dp_size, session.tp_rank,
                         session.pp_rank, session.dp_rank}) {
    Put(value, &out);
  }
  Put(session.pid, &out);
  Put(session.start_time_ns, &out);
  for (const std::string* text : {&session.session_id, &session.job_id, &session.host,
                                  &session.injector_version, &session.layout_source}) {
    PutString(*text, kMaxSessionString, &out);
  }
  // 5 strings of at most kMaxSessionString, and the fixed part, always leave room for a length.
  static_assert(kSessionFixedBytes + 6 * sizeof(uint32_t) + 5 * kMaxSessionString <
                MadeCountsPage::kSessionBytes);
  PutString(session.command, MadeCountsPage::kSessionBytes - out.size() - sizeof(uint32_t), &out);
  return out;
}

std::unique_ptr<MadeCountsPage> MadeCountsPage::Create(const std::string& path,
                                                       std::string* error) {
  return Create(path, MadeSession{}, error);
}

std::unique_ptr<MadeCountsPage> MadeCountsPage::Create(const std::string& path,
                                                       const MadeSession& session,
                                                       std::string* error) {
  const std::string encoded = session.known() ? EncodeMadeSession(session) : std::string();
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *error = ErrnoText("cannot create", path);
    return nullptr;
  }
  // Locked before it has a header: a collector never takes a file being made for an orphan.
  char* map = nullptr;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    *error = ErrnoText("cannot lock", path);
  } else {
    map = SizeAndMap(fd, path, error);
  }
  if (map == nullptr) {
    close(fd);
    unlink(path.c_str());
    return nullptr;
  }
  // A fresh file reads as zeros: only the header and the session are written. The magic goes
  // last, so a reader never takes a half-made file for a whole one.
  const uint32_t slots = kSlots;
  const uint32_t session_bytes = static_cast<uint32_t>(encoded.size());
  std::memcpy(map + sizeof kMagic, &slots, sizeof slots);
  std::memcpy(map + sizeof kMagic + sizeof slots, &session_bytes, sizeof session_bytes);
  std::memcpy(map + kLineBytes * (kSlots + 1), encoded.data(), encoded.size());
  new (map + kEndSignalOffset) std::atomic<uint32_t>(0);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    new (map + kLineBytes * (slot + 1)) std::atomic<uint64_t>(0);
  }
  std::memcpy(map, kMagic, sizeof kMagic);
  return std::unique_ptr<MadeCountsPage>(new MadeCountsPage(path, fd, map));
}

MadeCountsPage::MadeCountsPage(std::string path, int fd, char* map)
    : path_(std::move(path)), fd_(fd), map_(map) {
  MutexLock lock(&mutex_);
  free_.reserve(kSlots - 1);
  for (uint32_t slot = kSlots - 1; slot >= 1; --slot) free_.push_back(slot);  // 1 first
}

MadeCountsPage::~MadeCountsPage() {
  munmap(map_, kFileBytes);
  close(fd_);
}

void MadeCountsPage::Remove() { unlink(path_.c_str()); }

void MadeCountsPage::NameEndSignal(int signo) {
  if (signo != SIGINT && signo != SIGTERM) return;
  uint32_t none = 0;
  EndSignal()->compare_exchange_strong(none, static_cast<uint32_t>(signo),
                                       std::memory_order_relaxed);
}

bool MadeCountsPage::ReadOrphan(const std::string& path, uid_t* owner, uint64_t* total,
                                MadeSession* session, std::string* error) {
  error->clear();
  // O_NONBLOCK: a FIFO planted under the name must not hang the reader.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    *error = ErrnoText("cannot open", path);
    return false;
  }
  struct stat st;
  std::string bytes(kFileBytes, '\0');
  bool ok = false;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + " is not a regular file";
  } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) *error = ErrnoText("cannot lock", path);  // else: owner lives
  } else if (st.st_size != static_cast<off_t>(kFileBytes) ||
             pread(fd, bytes.data(), kFileBytes, 0) != static_cast<ssize_t>(kFileBytes)) {
    *error = path + " is " + std::to_string(st.st_size) + " bytes, not a made-counts file";
  } else {
    ok = ParseMadeCounts(bytes.data(), bytes.size(), total, session, error);
    *owner = st.st_uid;
  }
  close(fd);
  return ok;
}

std::atomic<uint64_t>* MadeCountsPage::SlotCount(uint32_t slot) const {
  return std::launder(reinterpret_cast<std::atomic<uint64_t>*>(map_ + kLineBytes * (slot + 1)));
}

std::atomic<uint32_t>* MadeCountsPage::EndSignal() const {
  return std::launder(reinterpret_cast<std::atomic<uint32_t>*>(map_ + kEndSignalOffset));
}

MadeCountsPage::Counter MadeCountsPage::Acquire() {
  MutexLock lock(&mutex_);
  if (free_.empty()) return Counter(SlotCount(0), 0, /*shared=*/true);
  const uint32_t slot = free_.back();
  free_.pop_back();
  return Counter(SlotCount(slot), slot, /*shared=*/false);
}

void MadeCountsPage::Release(const Counter& counter) {
  if (counter.count_ != SlotCount(counter.slot_) || counter.shared_) return;  // not an own slot
  MutexLock lock(&mutex_);
  free_.push_back(counter.slot_);
}

uint64_t MadeCountsPage::Total() const {
  uint64_t total = 0;
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    total += SlotCount(slot)->load(std::memory_order_relaxed);
  }
  return total;
}

bool ParseMadeCounts(const char* data, size_t size, uint64_t* total, MadeSession* session,
                     std::string* error) {
  using Page = MadeCountsPage;
  if (size != Page::kFileBytes) {
    *error = "made-counts file is " + std::to_string(size) + " bytes, not " +
             std::to_string(Page::kFileBytes);
    return false;
  }
  uint32_t slots = 0;
  uint32_t session_bytes = 0;
  std::memcpy(&slots, data + sizeof Page::kMagic, sizeof slots);
  std::memcpy(&session_bytes, data + sizeof Page::kMagic + sizeof slots, sizeof session_bytes);
  if (std::memcmp(data, Page::kMagic, sizeof Page::kMagic) != 0 || slots != Page::kSlots ||
      session_bytes > Page::kSessionBytes) {
    *error = "made-counts file has no valid header";
    return false;
  }
  uint32_t end_signal = 0;
  std::memcpy(&end_signal, data + kEndSignalOffset, sizeof end_signal);
  if (end_signal != 0 && end_signal != SIGINT && end_signal != SIGTERM) {
    *error = "made-counts file names signal " + std::to_string(end_signal) +
             " as its end, neither SIGINT nor SIGTERM";
    return false;
  }
  static const char kZeros[Page::kLineBytes] = {};
  if (std::memcmp(data + kHeaderUsed, kZeros, Page::kLineBytes - kHeaderUsed) != 0) {
    *error = "made-counts file has bytes where its header has none";
    return false;
  }
  uint64_t sum = 0;
  for (uint32_t slot = 0; slot < Page::kSlots; ++slot) {
    const char* line = data + Page::kLineBytes * (slot + 1);
    uint64_t count = 0;
    std::memcpy(&count, line, sizeof count);
    if (std::memcmp(line + sizeof count, kZeros, Page::kLineBytes - sizeof count) != 0) {
      *error = "made-counts file has bytes between its slots' counts";
      return false;
    }
    if (__builtin_add_overflow(sum, count, &sum)) {
      *error = "made-counts file's counts add up past 2^64";
      return false;
    }
  }
  const char* area = data + Page::kLineBytes * (Page::kSlots + 1);
  MadeSession named;
  if (session_bytes > 0 && !DecodeSession(area, session_bytes, &named)) {
    *error = "made-counts file's session is malformed (a field runs past its length, or no id)";
    return false;
  }
  for (size_t at = session_bytes; at < Page::kSessionBytes; at += Page::kLineBytes) {
    const size_t n = std::min<size_t>(Page::kLineBytes, Page::kSessionBytes - at);
    if (std::memcmp(area + at, kZeros, n) != 0) {
      *error = "made-counts file has bytes after its session";
      return false;
    }
  }
  named.end_signal = static_cast<int32_t>(end_signal);
  *total = sum;
  *session = std::move(named);
  return true;
}

}  // namespace flopscope
