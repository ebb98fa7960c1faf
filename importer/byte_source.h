#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flopscope::importer {

// Reads a file front to back in chunks, gunzipping it on the fly when it starts with the gzip
// magic (concatenated members included), so a trace is never held whole in memory. Also keeps a
// digest of the raw bytes (CRC-32 and Adler-32 side by side) that identifies the file's content.
//
// Errors name the problem and the compressed byte offset: a truncated .gz, corrupt deflate data,
// or data after the last gzip member.
class ByteSource {
 public:
  static absl::StatusOr<std::unique_ptr<ByteSource>> Open(const std::string& path);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Fills dest[0, capacity) with the next bytes; returns how many, 0 only at the end.
  absl::StatusOr<size_t> Read(char* dest, size_t capacity);

  bool compressed() const { return compressed_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t file_bytes_read() const { return file_bytes_read_; }
  // Bytes handed out by Read (decompressed, for a .gz).
  uint64_t bytes_delivered() const { return bytes_delivered_; }
  // Meaningful once Read returned 0.
  uint64_t digest() const { return (static_cast<uint64_t>(crc_) << 32) | adler_; }

 private:
  ByteSource(std::FILE* file, uint64_t file_size) : file_(file), file_size_(file_size) {}
  absl::Status Sniff();
  // Reads the next raw chunk into input_; false at the end of the file.
  absl::StatusOr<bool> FillInput();
  absl::StatusOr<size_t> ReadPlain(char* dest, size_t capacity);
  absl::StatusOr<size_t> ReadCompressed(char* dest, size_t capacity);
  absl::Status AfterMember();

  std::FILE* file_;
  const uint64_t file_size_;
  uint64_t file_bytes_read_ = 0;
  uint64_t bytes_delivered_ = 0;
  uint32_t crc_ = 0;
  uint32_t adler_ = 1;
  bool compressed_ = false;
  bool stream_ended_ = false;  // the last gzip member is complete and nothing follows
  bool inflate_ready_ = false;
  z_stream zs_{};
  std::vector<unsigned char> input_;
  size_t input_begin_ = 0;  // unread part of input_ for plain files
  size_t input_end_ = 0;
};

}  // namespace flopscope::importer
