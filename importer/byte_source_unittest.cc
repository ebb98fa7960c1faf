#include "importer/byte_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>

#include "importer/testing/temp_dir.h"

namespace flopscope::importer {
namespace {

using ::testing::HasSubstr;

std::string Gzip(const std::string& data) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, data.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

class ByteSourceTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& bytes) {
    const std::string path = dir_.File("f" + std::to_string(files_++));
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  static absl::StatusOr<std::string> ReadAll(const std::string& path, uint64_t* digest = nullptr) {
    absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path);
    if (!source.ok()) return source.status();
    std::string all;
    char chunk[4096];
    while (true) {
      absl::StatusOr<size_t> got = (*source)->Read(chunk, sizeof chunk);
      if (!got.ok()) return got.status();
      if (*got == 0) break;
      all.append(chunk, *got);
    }
    if (digest != nullptr) *digest = (*source)->digest();
    return all;
  }

  testing::TempDir dir_;
  int files_ = 0;
};

std::string Payload() {
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "{\"i\": " + std::to_string(i) + "},";
  return text;
}

TEST_F(ByteSourceTest, PlainAndGzipReadTheSameBytes) {
  const std::string payload = Payload();
  EXPECT_EQ(ReadAll(Write(payload)).value(), payload);
  EXPECT_EQ(ReadAll(Write(Gzip(payload))).value(), payload);
}

TEST_F(ByteSourceTest, ConcatenatedMembersAreOneStream) {
  EXPECT_EQ(ReadAll(Write(Gzip("first ") + Gzip("second"))).value(), "first second");
}

TEST_F(ByteSourceTest, TruncatedGzipIsDataLoss) {
  const std::string gz = Gzip(Payload());
  absl::StatusOr<std::string> read = ReadAll(Write(gz.substr(0, gz.size() / 2)));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("truncated gzip"));
}

TEST_F(ByteSourceTest, CorruptOrTrailingDataIsAnError) {
  std::string gz = Gzip(Payload());
  std::string corrupt = gz;
  for (size_t i = 20; i < 60; ++i) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5A);
  EXPECT_THAT(ReadAll(Write(corrupt)).status().message(), HasSubstr("corrupt gzip"));
  EXPECT_THAT(ReadAll(Write(gz + "garbage")).status().message(), HasSubstr("after the end"));
}

TEST_F(ByteSourceTest, DigestFollowsTheContent) {
  uint64_t a = 0, b = 0, c = 0;
  ASSERT_TRUE(ReadAll(Write("same bytes"), &a).ok());
  ASSERT_TRUE(ReadAll(Write("same bytes"), &b).ok());
  ASSERT_TRUE(ReadAll(Write("other bytes"), &c).ok());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(ByteSourceTest, MissingFileIsNotFound) {
  EXPECT_EQ(ByteSource::Open(dir_.File("absent")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace flopscope::importer
