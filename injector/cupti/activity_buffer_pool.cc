#include "injector/cupti/activity_buffer_pool.h"

#include <cstdlib>

namespace flopscope::injector::cupti {

ActivityBufferPool::ActivityBufferPool(uint64_t cap_bytes, size_t buffer_bytes)
    : cap_bytes_(cap_bytes), buffer_bytes_(buffer_bytes) {}

ActivityBufferPool::~ActivityBufferPool() {
  for (uint8_t* buffer : idle_) std::free(buffer);
}

uint8_t* ActivityBufferPool::Acquire() {
  {
    MutexLock lock(&mutex_);
    if (!idle_.empty()) {
      uint8_t* buffer = idle_.back();
      idle_.pop_back();
      return buffer;
    }
    if (allocated_ + buffer_bytes_ > cap_bytes_) {
      ++refusals_;
      return nullptr;
    }
    allocated_ += buffer_bytes_;  // charged before allocating, refunded on failure
  }
  void* buffer = std::aligned_alloc(kAlignment, buffer_bytes_);
  if (buffer == nullptr) {
    MutexLock lock(&mutex_);
    allocated_ -= buffer_bytes_;
    ++refusals_;
  }
  return static_cast<uint8_t*>(buffer);
}

void ActivityBufferPool::Release(uint8_t* buffer) {
  if (buffer == nullptr) return;
  {
    MutexLock lock(&mutex_);
    if (idle_.size() < kMaxIdle) {
      idle_.push_back(buffer);
      return;
    }
    allocated_ -= buffer_bytes_;
  }
  std::free(buffer);
}

uint64_t ActivityBufferPool::bytes_allocated() const {
  MutexLock lock(&mutex_);
  return allocated_;
}

uint64_t ActivityBufferPool::bytes_out() const {
  MutexLock lock(&mutex_);
  return allocated_ - idle_.size() * buffer_bytes_;
}

uint64_t ActivityBufferPool::refusals() const {
  MutexLock lock(&mutex_);
  return refusals_;
}

}  // namespace flopscope::injector::cupti
