#pragma once

// A mutex whose lock rules clang checks at compile time (-Wthread-safety), for code that must not
// depend on Abseil (the injector core: docs/architecture.md, isolation inside the job). The daemon
// and client use absl::Mutex and ABSL_GUARDED_BY; this is the same idea with no dependency.
//
// Usage:
//   Mutex mutex_;
//   int count_ FS_GUARDED_BY(mutex_);
//   void AddLocked() FS_REQUIRES(mutex_);
//   void CallCupti() FS_EXCLUDES(mutex_);   // "no lock of ours across a CUPTI call"
//   { MutexLock lock(&mutex_); ++count_; }
//
// Under GCC the macros expand to nothing; `make test` runs a clang pass with
// -Werror=thread-safety over every file that uses them (tests/style/thread_safety_check.py).

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define FS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define FS_THREAD_ANNOTATION(x)
#endif

#define FS_CAPABILITY(name) FS_THREAD_ANNOTATION(capability(name))
#define FS_SCOPED_CAPABILITY FS_THREAD_ANNOTATION(scoped_lockable)
#define FS_GUARDED_BY(x) FS_THREAD_ANNOTATION(guarded_by(x))
#define FS_PT_GUARDED_BY(x) FS_THREAD_ANNOTATION(pt_guarded_by(x))
#define FS_REQUIRES(...) FS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define FS_EXCLUDES(...) FS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define FS_ACQUIRE(...) FS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define FS_RELEASE(...) FS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define FS_TRY_ACQUIRE(...) FS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define FS_ASSERT_HELD(x) FS_THREAD_ANNOTATION(assert_capability(x))
#define FS_NO_THREAD_SAFETY_ANALYSIS FS_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace flopscope {

// std::mutex with a capability clang can follow. Not recursive.
class FS_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() FS_ACQUIRE() { mutex_.lock(); }
  void Unlock() FS_RELEASE() { mutex_.unlock(); }
  bool TryLock() FS_TRY_ACQUIRE(true) { return mutex_.try_lock(); }
  // BasicLockable spelling, for CondVar (std::condition_variable_any) only.
  void lock() FS_ACQUIRE() { mutex_.lock(); }
  void unlock() FS_RELEASE() { mutex_.unlock(); }
  // Tells the analysis the caller holds the lock (a callback reached from locked code).
  void AssertHeld() const FS_ASSERT_HELD(this) {}

 private:
  std::mutex mutex_;
};

// Holds `mu` for the enclosing scope.
class FS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) FS_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() FS_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Waits on a condition under a Mutex the caller holds (wraps std::condition_variable_any so the
// analysis still sees the lock held across the wait).
class CondVar {
 public:
  // Atomically releases `mu`, waits for a notification, and reacquires `mu`.
  void Wait(Mutex* mu) FS_REQUIRES(mu) { cv_.wait(*mu); }
  // Returns false on timeout.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) FS_REQUIRES(mu) {
    return cv_.wait_for(*mu, timeout) == std::cv_status::no_timeout;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace flopscope
