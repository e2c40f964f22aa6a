// JsonReader: reads members of a JSON object with errors that name the JSON path, for the
// protocol's message bodies and the agent's and driver's config files alike.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dockhand::protocol {

// A value at `path` is not what was expected. path is a JSON pointer ("/tasks/3/cpus").
class JsonPathError : public std::runtime_error {
 public:
  JsonPathError(std::string path, const std::string& what)
      : std::runtime_error((path.empty() ? std::string("/") : path) + ": " + what),
        path_(path.empty() ? "/" : std::move(path)),
        detail_(what) {}
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string path_;
  std::string detail_;
};

class JsonReader {
 public:
  // `object` must outlive the reader. Throws JsonPathError when it is not an object.
  JsonReader(const nlohmann::json& object, std::string path);

  const std::string& path() const { return path_; }
  std::string childPath(std::string_view key) const;
  bool has(std::string_view key) const;
  const nlohmann::json* find(std::string_view key) const;

  std::string requiredString(std::string_view key) const;
  std::string optionalString(std::string_view key, std::string fallback = {}) const;
  std::int64_t requiredInt(std::string_view key,
                           std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                           std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  std::int64_t optionalInt(std::string_view key, std::int64_t fallback,
                           std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                           std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  std::uint64_t requiredUnsigned(std::string_view key) const;
  double optionalNumber(std::string_view key, double fallback) const;
  bool optionalBool(std::string_view key, bool fallback) const;
  std::map<std::string, std::string> optionalStringMap(std::string_view key) const;
  std::vector<std::string> optionalStringList(std::string_view key) const;
  // The object member (an empty reader target if absent is not allowed: throws when absent).
  JsonReader requiredObject(std::string_view key) const;

  // Throws for any member not in `known` (config files: a typo must not pass silently).
  void rejectUnknown(const std::set<std::string, std::less<>>& known) const;

  [[noreturn]] void fail(std::string_view key, const std::string& what) const;

 private:
  const nlohmann::json& object_;
  std::string path_;
};

// Escapes a key for use in a JSON pointer (RFC 6901).
std::string escapePointerToken(std::string_view key);

}  // namespace dockhand::protocol
