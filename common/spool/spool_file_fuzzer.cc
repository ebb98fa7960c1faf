// Fuzzes the spool file reader (SpoolFile::OpenOrphanOfAnyOwner and Read): flopscoped's
// collector of orphaned spools (daemon/ingest/spool_collector.h) reads files other users wrote, so
// the bytes are untrusted. Besides not crashing: every entry the scan lists lies inside the file,
// entries come in increasing seq order, each can be read back or is refused, never more, and
// the hello's end (where Reset and Compact cut back to) lies inside what the scan accepted.

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/spool/spool_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      "/tmp/flopscope-spool-fuzz-" + std::to_string(getpid()) + ".spool";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  const bool written = size == 0 || write(fd, data, size) == static_cast<ssize_t>(size);
  close(fd);
  if (!written) return 0;
  uid_t owner = 0;
  std::string error;
  std::unique_ptr<flopscope::SpoolFile> file =
      flopscope::SpoolFile::OpenOrphanOfAnyOwner(path, &owner, &error);
  if (file == nullptr) return 0;
  if (file->empty_bytes() > file->bytes() || file->bytes() > size) std::abort();
  uint64_t previous = 0;
  flopscope::v1::UpMessage message;
  for (const flopscope::SpoolFile::Entry& entry : file->entries()) {
    if (entry.offset + entry.length > size || entry.seq <= previous) std::abort();
    previous = entry.seq;
    file->Read(entry, &message);  // false for a payload that does not parse: fine
  }
  return 0;
}
