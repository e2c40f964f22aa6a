// The config-schema checker on its own: each supported keyword, and the JSON paths it reports.
#include "plugins/config_schema.h"

#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

using nlohmann::json;

std::string problems(const json& value, const json& schema) {
  std::string out;
  for (const auto& p : checkAgainstSchema(value, schema)) {
    out +=
        (out.empty() ? "" : "; ") + (p.path.empty() ? std::string("/") : p.path) + ": " + p.message;
  }
  return out;
}

TEST(ConfigSchemaTest, Types) {
  EXPECT_EQ(problems(json::object(), {{"type", "object"}}), "");
  EXPECT_EQ(problems(json::array(), {{"type", "object"}}), "/: expected object, got array");
  EXPECT_EQ(problems(3, {{"type", "integer"}}), "");
  EXPECT_EQ(problems(3.0, {{"type", "integer"}}), "");
  EXPECT_EQ(problems(3.5, {{"type", "integer"}}), "/: expected integer, got number");
  EXPECT_EQ(problems(3, {{"type", "number"}}), "");
  EXPECT_EQ(problems(nullptr, {{"type", {"string", "null"}}}), "");
  EXPECT_EQ(problems(true, {{"type", {"string", "integer", "null"}}}),
            "/: expected string, integer or null, got boolean");
}

TEST(ConfigSchemaTest, ObjectsNameEveryProblemWithItsPath) {
  const json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "dir": {"type": "string", "minLength": 1},
      "retries": {"type": "integer", "minimum": 0, "maximum": 5},
      "targets": {"type": "array", "minItems": 1, "maxItems": 2,
                  "items": {"type": "object", "required": ["host"],
                            "properties": {"host": {"type": "string"}}}},
      "mode": {"enum": ["copy", "move"]},
      "a/b": {"const": 1}
    },
    "required": ["dir"],
    "additionalProperties": false
  })");
  EXPECT_EQ(problems(json::parse(R"({"dir": "/x"})"), schema), "");
  EXPECT_EQ(problems(json::object(), schema), "/dir: is required");
  EXPECT_EQ(problems(json::parse(R"({"retries": -1, "extra": 1, "a/b": 2,
                                     "targets": [{"host": "h"}, {}, {"host": 3}],
                                     "mode": "link", "dir": ""})"),
                     schema),
            "/a~1b: expected 1, got 2; /dir: must be at least 1 characters "
            "long; /extra: unknown key (not allowed by the schema); /mode: expected one of "
            R"("copy", "move", got "link"; /retries: must be >= 0, got -1; /targets: expected )"
            "at most 2 items, got 3; /targets/1/host: is required; /targets/2/host: expected "
            "string, got integer");
}

TEST(ConfigSchemaTest, AdditionalPropertiesAsSchemaAndIgnoredKeywords) {
  const json schema = {{"type", "object"},
                       {"additionalProperties", {{"type", "integer"}}},
                       {"title", "ignored"},
                       {"pattern", "^x$"}};
  EXPECT_EQ(problems(json::parse(R"({"a": 1, "b": "x"})"), schema),
            "/b: expected integer, got string");
  EXPECT_EQ(problems(json::array({1}), {{"items", false}}), "/0: no value is allowed here");
  EXPECT_EQ(problems(json::array(), {{"type", "array"}, {"minItems", 1}}),
            "/: expected at least 1 items, got 0");
}

TEST(ConfigSchemaTest, PatternMatchesSomewhereUnlessAnchored) {
  EXPECT_EQ(problems("bucket-7", {{"pattern", "[0-9]"}}), "");
  EXPECT_EQ(problems("x-bucket-7", {{"pattern", "^bucket-[0-9]+$"}}),
            R"(/: must match the pattern "^bucket-[0-9]+$", got "x-bucket-7")");
  EXPECT_EQ(problems(7, {{"pattern", "^x$"}}), "") << "a pattern concerns strings only";
  EXPECT_NE(problems("x", {{"pattern", "(unclosed"}})
                .find(R"(the schema's pattern "(unclosed" cannot be used)"),
            std::string::npos);
}

TEST(ConfigSchemaTest, FormatUriWantsAnAbsoluteUri) {
  const json uri = {{"type", "string"}, {"format", "uri"}};
  for (const char* good : {"https://store.example:8443/dav/blocks", "http://127.0.0.1/",
                           "file:///var/lib/x", "s3://bucket/key?versionId=3",
                           "urn:isbn:0451450523", "http://[::1]:80/a%20b", "HTTPS://user@host"}) {
    EXPECT_EQ(problems(good, uri), "") << good;
  }
  for (const char* bad : {"", "store.example/dav", "/var/lib/x", "https://", "http:///path",
                          "https://host/a b", "https://host/%zz", "https://host/%2", "1http://x",
                          "ht tp://x", "mailto:", "https://:80/", "https://höst/"}) {
    EXPECT_NE(problems(bad, uri).find("expected a URI"), std::string::npos) << bad;
  }
  EXPECT_EQ(problems("not a date", {{"format", "date-time"}}), "")
      << "other formats are not enforced";
}

}  // namespace
}  // namespace dockhand::agent
