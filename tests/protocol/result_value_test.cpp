#include "dockhand/protocol/result_value.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace dockhand::protocol {
namespace {

using nlohmann::json;

json valueOf(std::string_view bytes) {
  json result = json::object();
  putResultValue(result, bytes);
  return result;
}

TEST(ResultValueTest, Utf8TextStaysTextAndOtherBytesAreBase64) {
  EXPECT_EQ(valueOf("héllo ✓"), json({{"value", "héllo ✓"}}));
  EXPECT_EQ(valueOf(""), json({{"value", ""}}));
  EXPECT_EQ(valueOf("\xc3"), json({{"value_base64", "ww=="}}));          // cut short
  EXPECT_EQ(valueOf("\xc0\xaf"), json({{"value_base64", "wK8="}}));      // overlong
  EXPECT_EQ(valueOf("\xed\xa0\x80"), json({{"value_base64", "7aCA"}}));  // a surrogate
  EXPECT_TRUE(isUtf8("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(isUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(isUtf8("\xff"));
}

TEST(ResultValueTest, Base64MatchesTheRfcVectorsBothWays) {
  // RFC 4648 section 10.
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    EXPECT_EQ(base64Encode(bytes), text);
    auto back = base64Decode(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.error().message;
    EXPECT_EQ(*back, bytes);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  auto back = base64Decode(base64Encode(all));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, all);
}

TEST(ResultValueTest, BrokenBase64IsAnErrorNamingWhere) {
  EXPECT_NE(base64Decode("Zm9").error().message.find("multiple of 4"), std::string::npos);
  EXPECT_NE(base64Decode("Zm9v!A==").error().message.find("offset 4"), std::string::npos);
  EXPECT_FALSE(base64Decode("Z===").ok());      // padding where a character must be
  EXPECT_FALSE(base64Decode("Zg==Zg==").ok());  // padding before the end
  EXPECT_FALSE(base64Decode("Zg=A").ok());
}

TEST(ResultValueTest, ResultBytesReadsEachFormBack) {
  EXPECT_EQ(*resultBytes(json{{"stdout", "42\n"}}), "42\n");
  EXPECT_EQ(*resultBytes(json{{"value", "text"}, {"bytes", 4}}), "text");
  std::string binary("\x00\xff\x01", 3);
  EXPECT_EQ(*resultBytes(valueOf(binary)), binary);

  auto in_block = resultBytes(json{{"block", "task_7_result"}});
  ASSERT_FALSE(in_block.ok());
  EXPECT_NE(in_block.error().message.find("task_7_result"), std::string::npos);
  EXPECT_FALSE(resultBytes(json{{"bytes", 3}}).ok());
  EXPECT_FALSE(resultBytes(json{{"value", 3}}).ok());
  EXPECT_FALSE(resultBytes(json{{"value_base64", "@@@@"}}).ok());
  EXPECT_FALSE(resultBytes(json()).ok());
}

}  // namespace
}  // namespace dockhand::protocol
