// Loads the real libflopscope_transport.so the way the injector does (dlmopen into a new link
// namespace) and talks to a fake Collector served by this process's own gRPC: two gRPC copies in
// one process, neither seeing the other.
#include "injector/export/transport_loader.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "injector/transport/testing/fake_collector.h"
#include "injector/transport/testing/test_batch.h"

namespace flopscope::injector {
namespace {

using transport::testing::FakeCollector;
using transport::testing::Str;
using transport::testing::TempDir;
using transport::testing::TestBatch;
using transport::testing::TestHello;

// A thread that runs closures and lives until the process exits. Calls into the transport's
// namespace must come from such threads only (transport_loader.h: its libc shares each thread's
// pthread-key slots with ours, so a thread that leaves, or the test's main thread, would have its
// slots scribbled on).
class DedicatedThread {
 public:
  DedicatedThread() {
    std::thread([this] { Loop(); }).detach();  // never joined: it outlives every test
  }
  void Run(std::function<void()> task) {
    std::unique_lock<std::mutex> lock(mutex_);
    task_ = std::move(task);
    done_ = false;
    changed_.notify_all();
    changed_.wait(lock, [this] { return done_; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return task_ != nullptr; });
      std::function<void()> task = std::move(task_);
      task_ = nullptr;
      lock.unlock();
      task();
      lock.lock();
      done_ = true;
      changed_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> task_;
  bool done_ = false;
};

DedicatedThread& LoaderThread() {
  static auto* thread = new DedicatedThread();
  return *thread;
}

// One namespace per process is plenty (glibc allows only a few): loaded once, on the loader
// thread, shared by the tests.
const TransportLoader& Loader() {
  static const TransportLoader* loader = [] {
    const TransportLoader* loaded = nullptr;
    std::string error;
    LoaderThread().Run(
        [&] { loaded = TransportLoader::Load(FLOPSCOPE_TEST_TRANSPORT_PATH, &error).release(); });
    EXPECT_NE(loaded, nullptr) << error;
    return loaded;
  }();
  return *loader;
}

TEST(TransportLoaderTest, LoadsIntoItsOwnNamespace) {
  const TransportLoader& loader = Loader();
  ASSERT_NE(loader.api(), nullptr);
  EXPECT_EQ(loader.api()->abi_version, FS_TRANSPORT_ABI_VERSION);
  // Nothing of the transport is visible from the default namespace.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "flopscope_transport_api"), nullptr);
  void* again = dlopen(FLOPSCOPE_TEST_TRANSPORT_PATH, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_EQ(again, nullptr) << "the transport leaked into the default namespace";
}

TEST(TransportLoaderTest, SendsABatchToACollector) {
  TempDir dir;
  FakeCollector collector(dir.path() + "/c.sock");
  const fs_transport_api* api = Loader().api();
  const std::string target = collector.target();
  LoaderThread().Run([&] {
    fs_transport_options options{};
    options.target = Str(target);
    options.reconnect_initial_ms = 10;
    options.reconnect_max_ms = 50;
    char error[256] = {};
    fs_hello hello = TestHello();
    fs_transport* transport = api->create(&options, &hello, error, sizeof error);
    ASSERT_NE(transport, nullptr) << error;
    TestBatch batch(1, 2, 3);
    const fs_batch view = batch.view(/*final=*/true);
    api->submit(transport, &view);
    EXPECT_EQ(api->flush(transport, 10000), 1);
    fs_transport_stats stats{};
    api->get_stats(transport, &stats);
    EXPECT_EQ(stats.batches_acked, 1u);
    api->destroy(transport);
  });
  ASSERT_EQ(collector.committed().size(), 1u);
  EXPECT_EQ(collector.committed()[0].ranges_size(), 3);
  EXPECT_EQ(collector.hellos()[0].session_id(), "host-1-2");
}

TEST(TransportLoaderTest, AnotherThreadMayCallInAfterPreparing) {
  const TransportLoader& loader = Loader();
  static auto* other = new DedicatedThread();
  other->Run([&loader] {
    loader.PrepareThisThread();  // the namespace's ctype tables for this thread
    const std::string target = "unix:/nonexistent/flopscope.sock";
    fs_transport_options options{};
    options.target = Str(target);
    char error[256] = {};
    fs_hello hello = TestHello();
    fs_transport* transport = loader.api()->create(&options, &hello, error, sizeof error);
    ASSERT_NE(transport, nullptr) << error;
    EXPECT_EQ(loader.api()->flush(transport, 0), 1);  // nothing submitted
    loader.api()->destroy(transport);
  });
}

TEST(TransportLoaderTest, MissingLibraryIsAClearError) {
  std::string error;
  std::unique_ptr<TransportLoader> loaded;
  LoaderThread().Run(
      [&] { loaded = TransportLoader::Load("/nonexistent/libflopscope_transport.so", &error); });
  EXPECT_EQ(loaded, nullptr);
  EXPECT_NE(error.find("cannot load the transport library /nonexistent"), std::string::npos)
      << error;
}

TEST(TransportLoaderTest, DefaultPathIsBesideTheLibraryHoldingTheCode) {
  const std::string path = TransportLoader::DefaultPath();
  EXPECT_EQ(path.substr(path.size() - std::string("/libflopscope_transport.so").size()),
            "/libflopscope_transport.so");
}

}  // namespace
}  // namespace flopscope::injector
