#include "injector/ranges/range_tracker.h"

#include <unistd.h>

#include <algorithm>

#include "injector/ranges/metadata_mark.h"

namespace flopscope::injector {
namespace {

constexpr uint64_t kInstanceBlock = 1024;
constexpr uint32_t kPushPop = FS_RANGE_KIND_PUSH_POP;
constexpr uint32_t kStartEnd = FS_RANGE_KIND_START_END;

std::atomic<uint64_t> g_next_generation{1};

// Plain-old-data thread_locals: reading them needs no TLS init guard, which keeps the hot path
// to one TLS address lookup. `state` belongs to the tracker whose generation is stored.
struct ThreadSlot {
  uint64_t generation;
  void* state;
};
thread_local ThreadSlot t_slot;
// Set once this thread's thread_local destructors started: later NVTX calls on it are ignored
// rather than touching freed state.
thread_local bool t_exiting;

}  // namespace

struct RangeTracker::ThreadState {
  struct Frame {
    uint64_t path_id;  // 0: not tracked (path table full, or under an untracked range)
    uint64_t instance_id;
    uint64_t parent_instance_id;
    int64_t start_ns;
    const Domain* domain;
  };
  // The last path interned at a depth: loops push the same name under the same parent over and
  // over, and comparing one string is cheaper than hashing it into the cache.
  struct Memo {
    uint64_t parent_id = 0;
    const Domain* domain = nullptr;
    uint64_t path_id = 0;
    std::string name;
  };
  struct Stack {
    Frame frames[kMaxDepth];
    Memo memo[kMaxDepth];
    uint32_t depth = 0;
    uint32_t overflow = 0;  // pushes beyond kMaxDepth still waiting for their pops
    const Frame* Top() const { return depth == 0 ? nullptr : &frames[depth - 1]; }
  };

  RangeTracker* owner = nullptr;
  uint64_t generation = 0;
  ThreadBuffer* buffer = nullptr;
  uint64_t thread_id = 0;
  Stack modules;
  Stack phases;  // the flopscope domain
  // Written only by the owner thread, read by CountOpenRanges from the exporter at exit.
  std::atomic<uint32_t> open_ranges{0};
  uint64_t next_instance = 0;
  uint64_t instance_end = 0;
  PathCache cache;
  // The stacks' path ids and starts as the exporter may read them (open_stacks.h). Last: the
  // fields above are read on every push and pop, and stay where they were without it.
  OpenStacks published;

  Stack& StackFor(const Domain* domain) { return domain->is_flopscope ? phases : modules; }
  // Publishes frames [from, depth) of `domain`'s stack and its depth (open_stacks.h): owner
  // thread only. A push publishes its own frame, a pop from the top none.
  void Publish(const Domain* domain, uint32_t from) {
    const Stack& stack = StackFor(domain);
    const OpenStacks::Stack which =
        domain->is_flopscope ? OpenStacks::Stack::kPhases : OpenStacks::Stack::kModules;
    for (uint32_t i = from; i < stack.depth; ++i) {
      const Frame& frame = stack.frames[i];
      published.Publish(which, i, frame.instance_id, i == 0 ? 0 : stack.frames[i - 1].instance_id,
                        frame.path_id, frame.start_ns);
    }
    published.SetDepth(which, stack.depth);
  }
  void AddOpen(int delta) {
    open_ranges.store(open_ranges.load(std::memory_order_relaxed) + delta,
                      std::memory_order_relaxed);
  }
};

// Owns nothing; its destructor runs when the thread exits (thread_local), hands the thread's
// buffer over to the exporter and counts the ranges left open.
struct ThreadExitGuard {
  std::vector<RangeTracker::ThreadState*> states;
  ~ThreadExitGuard() {
    t_exiting = true;
    t_slot = ThreadSlot{};
    for (RangeTracker::ThreadState* state : states) state->owner->Detach(state);
  }
};

namespace {
thread_local ThreadExitGuard t_guard;
}  // namespace

RangeTracker::RangeTracker(const RangeClock* clock, PathTable* paths, BufferRegistry* buffers,
                           LossCounters* losses)
    : generation_(g_next_generation.fetch_add(1)),
      clock_(clock),
      paths_(paths),
      buffers_(buffers),
      losses_(losses) {}

RangeTracker::ThreadState* RangeTracker::ThisThread() {
  if (t_slot.generation == generation_) [[likely]] {
    return static_cast<ThreadState*>(t_slot.state);
  }
  return AttachThisThread();
}

RangeTracker::ThreadState* RangeTracker::AttachThisThread() {
  if (t_exiting) return nullptr;
  for (ThreadState* state : t_guard.states) {
    if (state->generation == generation_) {
      t_slot = ThreadSlot{generation_, state};
      return state;
    }
  }
  auto* state = new ThreadState();
  state->owner = this;
  state->generation = generation_;
  state->buffer = buffers_->Register();
  state->thread_id = static_cast<uint64_t>(gettid());
  {
    MutexLock lock(&threads_mutex_);
    live_threads_.push_back(state);
  }
  t_guard.states.push_back(state);
  t_slot = ThreadSlot{generation_, state};
  return state;
}

void RangeTracker::Detach(ThreadState* state) {
  const uint64_t unclosed = state->modules.depth + state->phases.depth;
  if (unclosed > 0) losses_->Add(LossCause::kUnclosedRange, unclosed);
  buffers_->Release(state->buffer);
  {
    MutexLock lock(&threads_mutex_);
    live_threads_.erase(std::remove(live_threads_.begin(), live_threads_.end(), state),
                        live_threads_.end());
  }
  delete state;
}

uint64_t RangeTracker::InternCached(ThreadState* state, uint64_t parent_id, const Domain* domain,
                                    std::string_view name) {
  if (const uint64_t cached = state->cache.Find(parent_id, domain->id, name)) return cached;
  const uint64_t id = paths_->Intern(parent_id, domain, name);
  if (id != 0) state->cache.Insert(parent_id, domain->id, name, id);
  return id;
}

uint64_t RangeTracker::NextInstanceId(ThreadState* state) {
  if (state->next_instance == state->instance_end) {
    // Ids come from one process-wide counter, a block at a time, so threads do not share a
    // cache line on every push.
    const uint64_t block = next_instance_block_.fetch_add(1, std::memory_order_relaxed);
    state->next_instance = block * kInstanceBlock + 1;
    state->instance_end = state->next_instance + kInstanceBlock;
  }
  return state->next_instance++;
}

int64_t RangeTracker::Now() const { return static_cast<int64_t>(clock_->Read()); }

void RangeTracker::Emit(ThreadState* state, const fs_range_event& event) {
  state->buffer->AppendRange(event);  // a full buffer counts the loss itself
}

int RangeTracker::Push(const Domain* domain, std::string_view name) {
  ThreadState* state = ThisThread();
  if (state == nullptr) return -1;
  ThreadState::Stack& stack = state->StackFor(domain);
  if (stack.depth >= kMaxDepth) {
    ++stack.overflow;
    losses_->Add(LossCause::kStackOverflow, 1);
    return -1;
  }
  const ThreadState::Frame* parent = stack.Top();
  uint64_t path_id = 0;
  if (parent == nullptr || parent->path_id != 0) {
    const uint64_t parent_id = parent == nullptr ? 0 : parent->path_id;
    ThreadState::Memo& memo = stack.memo[stack.depth];
    if (memo.path_id != 0 && memo.parent_id == parent_id && memo.domain == domain &&
        memo.name == name) {
      path_id = memo.path_id;
    } else {
      path_id = InternCached(state, parent_id, domain, name);
      if (path_id != 0) {
        memo.parent_id = parent_id;
        memo.domain = domain;
        memo.path_id = path_id;
        memo.name.assign(name.data(), name.size());
      }
    }
  }
  if (path_id == 0) losses_->Add(LossCause::kTooManyPaths, 1);
  ThreadState::Frame& frame = stack.frames[stack.depth];
  frame.path_id = path_id;
  frame.instance_id = NextInstanceId(state);
  frame.parent_instance_id = parent == nullptr ? 0 : parent->instance_id;
  frame.domain = domain;
  ++stack.depth;
  state->AddOpen(1);
  // A step's push may open a counter window: before the timestamp, like the rest of our work.
  if (domain->is_flopscope && steps_ != nullptr) [[unlikely]] {
    steps_->Opened(name, path_id, frame.instance_id);
  }
  frame.start_ns = Now();  // last, so the tool's own work falls outside the range
  state->Publish(domain, stack.depth - 1);
  return static_cast<int>(stack.depth - 1);
}

int RangeTracker::Pop(const Domain* domain) {
  const int64_t end_ns = Now();  // first, for the same reason
  ThreadState* state = ThisThread();
  if (state == nullptr) return -1;
  ThreadState::Stack& stack = state->StackFor(domain);
  if (stack.overflow > 0) {
    --stack.overflow;
    return static_cast<int>(kMaxDepth + stack.overflow);
  }
  // NVTX keeps one stack per domain; ours interleaves the module domains, so pop the innermost
  // range of this domain (normally the top).
  int index = static_cast<int>(stack.depth) - 1;
  while (index >= 0 && stack.frames[index].domain != domain) --index;
  if (index < 0) {
    losses_->Add(LossCause::kUnmatchedPop, 1);
    return -1;
  }
  const ThreadState::Frame frame = stack.frames[index];
  std::copy(stack.frames + index + 1, stack.frames + stack.depth, stack.frames + index);
  --stack.depth;
  state->AddOpen(-1);
  // Normally the top: only the depth changes. A range popped from under another domain's
  // ranges shifted those down a slot.
  state->Publish(domain, static_cast<uint32_t>(index));
  // Read before the step tracker hears of the pop: the pop of a window's last step closes the
  // window, and that step is still counted.
  const uint8_t counted = Counted();
  if (domain->is_flopscope && steps_ != nullptr) [[unlikely]] {
    steps_->Closed(frame.instance_id);
  }
  if (frame.path_id != 0) {
    Emit(state, fs_range_event{frame.path_id, frame.instance_id, frame.parent_instance_id,
                               state->thread_id, frame.start_ns, end_ns, kPushPop, counted});
  }
  return index;
}

uint64_t RangeTracker::Start(const Domain* domain, std::string_view name) {
  ThreadState* state = ThisThread();
  if (state == nullptr) return 0;
  const ThreadState::Frame* parent = state->StackFor(domain).Top();
  uint64_t path_id = 0;
  if (parent == nullptr || parent->path_id != 0) {
    path_id = InternCached(state, parent == nullptr ? 0 : parent->path_id, domain, name);
  }
  if (path_id == 0) losses_->Add(LossCause::kTooManyPaths, 1);
  const uint64_t id = NextInstanceId(state);
  const OpenStartEnd open{path_id, parent == nullptr ? 0 : parent->instance_id, state->thread_id,
                          Now(), domain->is_flopscope};
  bool stored = false;
  {
    MutexLock lock(&start_end_mutex_);
    if (open_start_end_.size() < kMaxOpenStartEnd) {
      open_start_end_.emplace(id, open);
      stored = true;
    }
  }
  if (!stored) {
    losses_->Add(LossCause::kStackOverflow, 1);
    return 0;  // End(0) is ignored: the loss is already counted
  }
  if (open.flopscope && steps_ != nullptr) steps_->Opened(name, path_id, id);
  return id;
}

void RangeTracker::End(uint64_t range_id) {
  const int64_t end_ns = Now();
  if (range_id == 0) return;
  OpenStartEnd open;
  {
    MutexLock lock(&start_end_mutex_);
    auto it = open_start_end_.find(range_id);
    if (it == open_start_end_.end()) {
      losses_->Add(LossCause::kUnmatchedPop, 1);
      return;
    }
    open = it->second;
    open_start_end_.erase(it);
  }
  ThreadState* state = open.path_id == 0 ? nullptr : ThisThread();
  if (state != nullptr) {
    Emit(state, fs_range_event{open.path_id, range_id, open.parent_instance_id, open.thread_id,
                               open.start_ns, end_ns, kStartEnd, Counted()});
  }
  if (open.flopscope && steps_ != nullptr) steps_->Closed(range_id);
}

void RangeTracker::Mark(const Domain* domain, std::string_view text) {
  if (!domain->is_flopscope) return;
  std::optional<MetadataEntry> entry = ParseMetadataMark(text);
  if (!entry) return;
  ThreadState* state = ThisThread();
  if (state == nullptr) return;
  state->buffer->AppendMetadata(
      MetadataRecord{std::move(entry->key), std::move(entry->value), Now()});
}

RangeContext RangeTracker::CurrentContext() {
  ThreadState* state = ThisThread();
  if (state == nullptr) return {};
  const ThreadState::Frame* top = state->modules.Top();
  if (top == nullptr) return {};
  return RangeContext{top->path_id, top->instance_id};
}

ThreadBuffer* RangeTracker::OrphanBuffer() {
  if (orphan_buffer_ == nullptr) {
    try {
      orphan_buffer_ = buffers_->Register();
    } catch (...) {
      return nullptr;  // out of memory: the caller counts what it could not append
    }
  }
  return orphan_buffer_;
}

// The calling thread's buffer, or the orphan buffer (under its lock) for a thread whose state is
// gone; `append(buffer)` returns how many records went in, `count` is how many it was given.
template <typename Append>
size_t RangeTracker::AppendToSomeBuffer(size_t count, Append append) {
  if (ThreadState* state = ThisThread()) return append(state->buffer);
  MutexLock lock(&orphan_mutex_);
  ThreadBuffer* buffer = OrphanBuffer();
  if (buffer != nullptr) return append(buffer);
  losses_->Add(LossCause::kBufferFull, count);
  return 0;
}

bool RangeTracker::AppendKernel(const fs_kernel& kernel) {
  return AppendToSomeBuffer(1, [&](ThreadBuffer* buffer) -> size_t {
           return buffer->AppendKernel(kernel) ? 1 : 0;
         }) == 1;
}

size_t RangeTracker::AppendKernels(const fs_kernel* kernels, size_t count) {
  return AppendToSomeBuffer(
      count, [&](ThreadBuffer* buffer) { return buffer->AppendKernels(kernels, count); });
}

bool RangeTracker::AppendMetadata(std::string key, std::string value) {
  return AppendToSomeBuffer(1, [&](ThreadBuffer* buffer) -> size_t {
           return buffer->AppendMetadata(MetadataRecord{std::move(key), std::move(value), Now()})
                      ? 1
                      : 0;
         }) == 1;
}

size_t RangeTracker::AppendKernelFlops(std::vector<KernelFlopsRecord>* records) {
  return AppendToSomeBuffer(
      records->size(), [&](ThreadBuffer* buffer) { return buffer->AppendKernelFlops(records); });
}

bool RangeTracker::AppendWindow(CounterWindowRecord record) {
  return AppendToSomeBuffer(1, [&](ThreadBuffer* buffer) -> size_t {
           return buffer->AppendWindow(std::move(record)) ? 1 : 0;
         }) == 1;
}

void RangeTracker::ReadOpenStacks(std::vector<ThreadOpenStacks>* out) {
  out->clear();
  // Holds threads_mutex_, so no thread's state is freed meanwhile (Detach takes it); the owner
  // threads take it only when they attach or exit, never to push or pop.
  MutexLock lock(&threads_mutex_);
  for (const ThreadState* state : live_threads_) {
    ThreadOpenStacks stacks;
    if (!state->published.Read(&stacks)) continue;
    if (stacks.modules.empty() && stacks.phases.empty()) continue;
    stacks.thread_id = state->thread_id;
    out->push_back(std::move(stacks));
  }
}

uint64_t RangeTracker::CountOpenRanges() {
  uint64_t open = 0;
  {
    MutexLock lock(&threads_mutex_);
    for (const ThreadState* state : live_threads_) {
      open += state->open_ranges.load(std::memory_order_relaxed);
    }
  }
  MutexLock lock(&start_end_mutex_);
  for (const auto& [id, range] : open_start_end_) {
    if (range.path_id != 0) ++open;
  }
  return open;
}

}  // namespace flopscope::injector
