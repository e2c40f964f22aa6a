#include "blocks/checksum.h"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

TEST(ChecksumTest, KnownValues) {
  Xxh64 empty;
  EXPECT_EQ(empty.text(), "xxh64:ef46db3751d8e999");  // XXH64 of no bytes, seed 0
  Xxh64 abc;
  abc.update("abc", 3);
  EXPECT_EQ(abc.text(), "xxh64:44bc2cf5ad770999");
}

TEST(ChecksumTest, IncrementalEqualsWhole) {
  std::string data(100000, 'x');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  Xxh64 whole;
  whole.update(data.data(), data.size());
  Xxh64 pieces;
  for (std::size_t i = 0; i < data.size(); i += 333) {
    pieces.update(data.data() + i, std::min<std::size_t>(333, data.size() - i));
  }
  EXPECT_EQ(whole.value(), pieces.value());
}

TEST(ChecksumTest, FormatAndParseRoundTrip) {
  EXPECT_EQ(formatChecksum(0x0123456789abcdefULL), "xxh64:0123456789abcdef");
  EXPECT_EQ(parseChecksum("xxh64:0123456789abcdef"), 0x0123456789abcdefULL);
  EXPECT_EQ(parseChecksum("xxh64:0123456789ABCDEF"), 0x0123456789abcdefULL);
  EXPECT_FALSE(parseChecksum("xxh64:0123"));
  EXPECT_FALSE(parseChecksum("md5:0123456789abcdef"));
  EXPECT_FALSE(parseChecksum("xxh64:0123456789abcdeg"));
}

TEST(ChecksumTest, OfFileMatchesStreaming) {
  auto path = std::filesystem::temp_directory_path() / "dockhand-checksum-test.bin";
  std::string data(3 << 20, 'q');
  std::ofstream(path, std::ios::binary)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
  Xxh64 hash;
  hash.update(data.data(), data.size());
  EXPECT_EQ(checksumOfFile(path), hash.text());
  std::filesystem::remove(path);
  EXPECT_THROW(checksumOfFile(path), std::system_error);
}

}  // namespace
}  // namespace dockhand::agent
