#include "importer/byte_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace flopscope::importer {
namespace {

constexpr size_t kInputChunk = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> ByteSource::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open: ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fileno(file), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(file);
    return absl::InvalidArgumentError("not a regular file");
  }
  std::unique_ptr<ByteSource> source(new ByteSource(file, static_cast<uint64_t>(st.st_size)));
  if (absl::Status s = source->Sniff(); !s.ok()) return s;
  return source;
}

ByteSource::~ByteSource() {
  if (inflate_ready_) inflateEnd(&zs_);
  std::fclose(file_);
}

absl::Status ByteSource::Sniff() {
  input_.resize(kInputChunk);
  absl::StatusOr<bool> filled = FillInput();
  if (!filled.ok()) return filled.status();
  compressed_ = input_end_ >= 2 && input_[0] == 0x1f && input_[1] == 0x8b;
  if (!compressed_) return absl::OkStatus();
  // 15 + 32: a 32 KiB window and automatic gzip/zlib header detection.
  if (inflateInit2(&zs_, 15 + 32) != Z_OK) return absl::InternalError("zlib inflateInit2 failed");
  inflate_ready_ = true;
  zs_.next_in = input_.data();
  zs_.avail_in = static_cast<uInt>(input_end_);
  return absl::OkStatus();
}

absl::StatusOr<bool> ByteSource::FillInput() {
  const size_t got = std::fread(input_.data(), 1, input_.size(), file_);
  if (got == 0 && std::ferror(file_)) {
    return absl::DataLossError(
        absl::StrCat("read error at byte ", file_bytes_read_, ": ", std::strerror(errno)));
  }
  crc_ = static_cast<uint32_t>(crc32(crc_, input_.data(), static_cast<uInt>(got)));
  adler_ = static_cast<uint32_t>(adler32(adler_, input_.data(), static_cast<uInt>(got)));
  file_bytes_read_ += got;
  input_begin_ = 0;
  input_end_ = got;
  return got > 0;
}

absl::StatusOr<size_t> ByteSource::Read(char* dest, size_t capacity) {
  absl::StatusOr<size_t> got =
      compressed_ ? ReadCompressed(dest, capacity) : ReadPlain(dest, capacity);
  if (got.ok()) bytes_delivered_ += *got;
  return got;
}

absl::StatusOr<size_t> ByteSource::ReadPlain(char* dest, size_t capacity) {
  if (input_begin_ == input_end_) {
    absl::StatusOr<bool> more = FillInput();
    if (!more.ok()) return more.status();
    if (!*more) return 0;
  }
  const size_t n = std::min(capacity, input_end_ - input_begin_);
  std::memcpy(dest, input_.data() + input_begin_, n);
  input_begin_ += n;
  return n;
}

absl::StatusOr<size_t> ByteSource::ReadCompressed(char* dest, size_t capacity) {
  zs_.next_out = reinterpret_cast<unsigned char*>(dest);
  zs_.avail_out = static_cast<uInt>(capacity);
  while (zs_.avail_out == capacity && !stream_ended_) {
    if (zs_.avail_in == 0) {
      absl::StatusOr<bool> more = FillInput();
      if (!more.ok()) return more.status();
      if (!*more) {
        return absl::DataLossError(
            absl::StrCat("truncated gzip file: the compressed data ends at byte ", file_bytes_read_,
                         " before the end of its stream"));
      }
      zs_.next_in = input_.data();
      zs_.avail_in = static_cast<uInt>(input_end_);
    }
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      if (absl::Status s = AfterMember(); !s.ok()) return s;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const uint64_t at = file_bytes_read_ - zs_.avail_in;
      return absl::DataLossError(absl::StrCat("corrupt gzip data near compressed byte ", at, ": ",
                                              zs_.msg != nullptr ? zs_.msg : "inflate failed"));
    }
  }
  return capacity - zs_.avail_out;
}

// After one gzip member ends, another may follow (concatenated .gz files are valid gzip);
// anything else after the data is an error rather than silently ignored.
absl::Status ByteSource::AfterMember() {
  if (zs_.avail_in == 0) {
    absl::StatusOr<bool> more = FillInput();
    if (!more.ok()) return more.status();
    if (!*more) {
      stream_ended_ = true;
      return absl::OkStatus();
    }
    zs_.next_in = input_.data();
    zs_.avail_in = static_cast<uInt>(input_end_);
  }
  const uint64_t at = file_bytes_read_ - zs_.avail_in;
  if (zs_.avail_in < 2 || zs_.next_in[0] != 0x1f || zs_.next_in[1] != 0x8b) {
    return absl::DataLossError(
        absl::StrCat("unexpected data after the end of the gzip stream at byte ", at));
  }
  if (inflateReset(&zs_) != Z_OK) return absl::InternalError("zlib inflateReset failed");
  return absl::OkStatus();
}

}  // namespace flopscope::importer
