#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace flopscope::importer::testing {

// The importer reads files, not buffers (ByteSource, SQLite), so its fuzzers hand each input over
// as one temporary file: made once per process under $TMPDIR (else /tmp), rewritten for every
// input, removed at exit. Not thread-safe; libFuzzer calls a target from one thread.
class FuzzInputFile {
 public:
  // The file now holding exactly `data`; aborts when it cannot be written (a harness failure,
  // which must not pass for a clean run).
  static const std::string& Write(const uint8_t* data, size_t size) {
    static FuzzInputFile* file = new FuzzInputFile();  // lives until exit: see ~FuzzInputFile
    file->Rewrite(data, size);
    return file->path_;
  }

 private:
  FuzzInputFile() {
    const char* dir = getenv("TMPDIR");
    path_ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/flopscope-fuzz-XXXXXX";
    fd_ = mkstemp(path_.data());
    if (fd_ < 0) abort();
    static std::string* to_remove = &path_;
    atexit([] { unlink(to_remove->c_str()); });
  }

  // Overwrites, then cuts to `size`: truncating to 0 first would make ext4 flush the file to
  // disk when the reader closes it (auto_da_alloc), which slowed each run to milliseconds.
  void Rewrite(const uint8_t* data, size_t size) {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) abort();
      done += static_cast<size_t>(n);
    }
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0) abort();
  }

  std::string path_;
  int fd_ = -1;
};

}  // namespace flopscope::importer::testing
