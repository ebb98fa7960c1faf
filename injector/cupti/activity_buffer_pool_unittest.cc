#include "injector/cupti/activity_buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace flopscope::injector::cupti {
namespace {

TEST(ActivityBufferPoolTest, RefusesBeyondItsCapAndReusesReleasedBuffers) {
  ActivityBufferPool pool(/*cap_bytes=*/3 * 1024, /*buffer_bytes=*/1024);
  uint8_t* a = pool.Acquire();
  uint8_t* b = pool.Acquire();
  uint8_t* c = pool.Acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_EQ(pool.refusals(), 1u);
  EXPECT_EQ(pool.bytes_allocated(), 3u * 1024);

  EXPECT_EQ(pool.bytes_out(), 3u * 1024);
  pool.Release(b);
  EXPECT_EQ(pool.bytes_out(), 2u * 1024);  // kept idle: allocated, not out
  EXPECT_EQ(pool.Acquire(), b);            // reused, no new allocation
  EXPECT_EQ(pool.bytes_allocated(), 3u * 1024);
  EXPECT_EQ(pool.bytes_out(), 3u * 1024);
  pool.Release(a);
  pool.Release(b);
  pool.Release(c);
}

TEST(ActivityBufferPoolTest, BuffersAreAlignedForActivityRecords) {
  ActivityBufferPool pool(1 << 20, 4096);
  uint8_t* buffer = pool.Acquire();
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer) % ActivityBufferPool::kAlignment, 0u);
  pool.Release(buffer);
}

TEST(ActivityBufferPoolTest, ReleasingBeyondTheIdleLimitFreesAndRefunds) {
  ActivityBufferPool pool(1 << 20, 1024);
  uint8_t* buffers[ActivityBufferPool::kMaxIdle + 2];
  for (uint8_t*& buffer : buffers) buffer = pool.Acquire();
  for (uint8_t* buffer : buffers) pool.Release(buffer);
  EXPECT_EQ(pool.bytes_allocated(), ActivityBufferPool::kMaxIdle * 1024u);
}

}  // namespace
}  // namespace flopscope::injector::cupti
