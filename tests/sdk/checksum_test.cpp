// dockhand/checksum.hpp against the xxhash library the agent uses: the same value for every
// length around the stripe and lane boundaries, fed whole and in uneven pieces, and the
// "xxh64:" text read back.
#include "dockhand/checksum.hpp"

#include <xxhash.h>

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace dockhand::sdk {
namespace {

std::string randomBytes(std::size_t size, std::mt19937_64& random) {
  std::string bytes(size, '\0');
  for (auto& c : bytes) c = static_cast<char>(random() & 0xFFU);
  return bytes;
}

TEST(SdkChecksumTest, MatchesTheXxhashLibraryForEveryLengthAndEveryWayOfFeedingIt) {
  std::mt19937_64 random(20261206);
  for (std::size_t size = 0; size < 300; ++size) {
    const std::string bytes = randomBytes(size, random);
    const std::uint64_t expected = XXH64(bytes.data(), bytes.size(), 0);
    Xxh64 whole;
    whole.update(bytes.data(), bytes.size());
    ASSERT_EQ(whole.value(), expected) << size << " bytes";
    Xxh64 pieces;
    for (std::size_t at = 0; at < size;) {
      const std::size_t piece = std::min<std::size_t>(1 + random() % 40, size - at);
      pieces.update(bytes.data() + at, piece);
      at += piece;
    }
    ASSERT_EQ(pieces.value(), expected) << size << " bytes in pieces";
  }
  const std::string large = randomBytes(1 << 20, random);
  EXPECT_EQ(checksumOf(large), formatChecksum(XXH64(large.data(), large.size(), 0)));
  Xxh64 seeded(42);
  seeded.update(large.data(), 1000);
  EXPECT_EQ(seeded.value(), XXH64(large.data(), 1000, 42));
}

TEST(SdkChecksumTest, TheTextFormIsReadBackAndAnythingElseIsRefused) {
  EXPECT_EQ(checksumOf(""), "xxh64:ef46db3751d8e999");
  std::uint64_t value = 0;
  ASSERT_TRUE(parseChecksum("xxh64:EF46DB3751D8E999", value));
  EXPECT_EQ(value, 0xef46db3751d8e999ULL);
  for (const char* bad :
       {"", "xxh64:", "xxh64:ef46db3751d8e99", "xxh64:ef46db3751d8e9999", "XXH64:ef46db3751d8e999",
        "sha1:ef46db3751d8e999", "xxh64:ef46db3751d8e99g"}) {
    EXPECT_FALSE(parseChecksum(bad, value)) << bad;
  }
}

}  // namespace
}  // namespace dockhand::sdk
