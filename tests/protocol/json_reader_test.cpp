// JsonReader: the reader under every message body (and the agent's config files). Its errors
// must name the JSON pointer of the offending value.
#include "dockhand/protocol/json_reader.h"

#include <gtest/gtest.h>

namespace dockhand::protocol {
namespace {

using nlohmann::json;

// Runs `read` and returns the path of the JsonPathError it throws ("<none>" when it throws none).
template <typename F>
std::string errorPath(F read) {
  try {
    read();
  } catch (const JsonPathError& e) {
    return e.path();
  }
  return "<none>";
}

TEST(JsonReaderTest, RefusesNonObjectAtItsPath) {
  json array = json::array();
  EXPECT_EQ(errorPath([&] { JsonReader r(array, "/config"); }), "/config");
  EXPECT_EQ(errorPath([&] { JsonReader r(array, ""); }), "/");
}

TEST(JsonReaderTest, EscapesPointerTokens) {
  EXPECT_EQ(escapePointerToken("plain"), "plain");
  EXPECT_EQ(escapePointerToken("a/b"), "a~1b");
  EXPECT_EQ(escapePointerToken("~/"), "~0~1");
  EXPECT_EQ(escapePointerToken(""), "");
}

TEST(JsonReaderTest, ReadsIntegersWithinRange) {
  json j = {{"n", 5},
            {"big", 9223372036854775807LL},
            {"huge", 18446744073709551615ULL},
            {"f", 2.0},
            {"frac", 2.5},
            {"s", "5"}};
  JsonReader r(j, "/x");
  EXPECT_EQ(r.requiredInt("n", 0, 10), 5);
  EXPECT_EQ(r.requiredInt("big"), 9223372036854775807LL);
  EXPECT_EQ(r.requiredInt("f"), 2);
  EXPECT_EQ(errorPath([&] { r.requiredInt("n", 6, 10); }), "/x/n");
  EXPECT_EQ(errorPath([&] { r.requiredInt("huge"); }), "/x/huge");
  EXPECT_EQ(errorPath([&] { r.requiredInt("frac"); }), "/x/frac");
  EXPECT_EQ(errorPath([&] { r.requiredInt("s"); }), "/x/s");
  EXPECT_EQ(errorPath([&] { r.requiredInt("missing"); }), "/x/missing");
  EXPECT_EQ(r.optionalInt("missing", 42), 42);
  EXPECT_EQ(r.requiredUnsigned("huge"), 18446744073709551615ULL);
}

// Found by the message_body fuzz target: a float too large for int64 ("cores":
// 184467440737095516151) was converted before its range was checked, which is undefined
// behaviour (the dev preset's UBSan aborts on it). It must be refused like any other
// out-of-range number.
TEST(JsonReaderTest, RefusesFloatsOutsideInt64WithoutConvertingThem) {
  json j = json::parse(R"({"a": 184467440737095516151, "b": 1e300, "c": -1e300,
                           "d": 9.3e18, "e": -9.3e18, "f": 1e18})");
  JsonReader r(j, "");
  for (const char* key : {"a", "b", "c", "d", "e"}) {
    EXPECT_EQ(errorPath([&] { r.requiredInt(key); }), std::string("/") + key);
    EXPECT_EQ(errorPath([&] { r.requiredUnsigned(key); }), std::string("/") + key);
  }
  EXPECT_EQ(r.requiredInt("f"), 1000000000000000000LL);
}

TEST(JsonReaderTest, RejectsUnknownKeysNamingTheKey) {
  json j = {{"known", 1}, {"typo", 2}};
  JsonReader r(j, "/agent");
  EXPECT_EQ(errorPath([&] { r.rejectUnknown({"known"}); }), "/agent/typo");
  EXPECT_EQ(errorPath([&] { r.rejectUnknown({"known", "typo"}); }), "<none>");
}

TEST(JsonReaderTest, ErrorTextStartsWithThePath) {
  json j = {{"level", 3}};
  JsonReader r(j, "");
  try {
    r.requiredString("level");
    FAIL() << "accepted a number as a string";
  } catch (const JsonPathError& e) {
    EXPECT_EQ(std::string(e.what()), "/level: expected a string, got number");
  }
}

}  // namespace
}  // namespace dockhand::protocol
