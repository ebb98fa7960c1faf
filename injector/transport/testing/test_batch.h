#pragma once

#include <string>
#include <vector>

#include "injector/transport/transport_abi.h"

namespace flopscope::transport::testing {

inline fs_str Str(const std::string& text) {
  return fs_str{text.data(), static_cast<uint32_t>(text.size())};
}

// Owns the storage behind an fs_batch for tests: `paths` path definitions named p<id>, `ranges`
// range events on the first path, `metadata` key/values and the given losses.
class TestBatch {
 public:
  TestBatch(uint64_t first_path_id, int paths, int ranges, int metadata = 0,
            std::vector<fs_loss> losses = {})
      : losses_(std::move(losses)) {
    names_.reserve(paths + 2 * metadata);
    for (int i = 0; i < paths; ++i) {
      names_.push_back("p" + std::to_string(first_path_id + i));
      paths_.push_back(fs_range_path{first_path_id + i, 0, Str(names_.back()), Str(domain_)});
    }
    for (int i = 0; i < ranges; ++i) {
      ranges_.push_back(fs_range_event{first_path_id, uint64_t(i) + 1, 0, 42, 100, 200, 1, 0});
    }
    for (int i = 0; i < metadata; ++i) {
      names_.push_back("key" + std::to_string(i));
      const fs_str key = Str(names_.back());
      names_.push_back("value" + std::to_string(i));
      metadata_.push_back(fs_metadata{key, Str(names_.back()), 7});
    }
  }
  TestBatch(const TestBatch&) = delete;
  TestBatch& operator=(const TestBatch&) = delete;

  fs_batch view(bool final = false) const {
    fs_batch batch{};
    batch.paths = paths_.data();
    batch.num_paths = static_cast<uint32_t>(paths_.size());
    batch.ranges = ranges_.data();
    batch.num_ranges = static_cast<uint32_t>(ranges_.size());
    batch.metadata = metadata_.data();
    batch.num_metadata = static_cast<uint32_t>(metadata_.size());
    batch.losses = losses_.data();
    batch.num_losses = static_cast<uint32_t>(losses_.size());
    batch.final = final ? 1 : 0;
    return batch;
  }

 private:
  std::string domain_ = "";
  std::vector<std::string> names_;
  std::vector<fs_range_path> paths_;
  std::vector<fs_range_event> ranges_;
  std::vector<fs_metadata> metadata_;
  std::vector<fs_loss> losses_;
};

// Hello with fixed test values; the strings are static.
inline fs_hello TestHello() {
  static const std::string session = "host-1-2", job = "job-t", host = "host", version = "0.1.0",
                           command = "python train.py", status = "no CUDA driver", source = "env";
  fs_hello hello{};
  hello.session_id = Str(session);
  hello.job_id = Str(job);
  hello.host = Str(host);
  hello.injector_version = Str(version);
  hello.command = Str(command);
  hello.gpu_status = Str(status);
  hello.rank = 3;
  hello.local_rank = 1;
  hello.world_size = 8;
  hello.layout = fs_layout{2, 1, 4, 1, 0, 1, Str(source)};
  hello.pid = 1;
  hello.start_time_ns = 2;
  return hello;
}

}  // namespace flopscope::transport::testing
