#include "dockhand/protocol/json_reader.h"

#include <cmath>

#include <fmt/format.h>

namespace dockhand::protocol {

using nlohmann::json;

std::string escapePointerToken(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

JsonReader::JsonReader(const json& object, std::string path)
    : object_(object), path_(std::move(path)) {
  if (!object_.is_object()) {
    throw JsonPathError(path_, fmt::format("expected an object, got {}", object_.type_name()));
  }
}

std::string JsonReader::childPath(std::string_view key) const {
  return path_ + "/" + escapePointerToken(key);
}

bool JsonReader::has(std::string_view key) const { return find(key) != nullptr; }

const json* JsonReader::find(std::string_view key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void JsonReader::fail(std::string_view key, const std::string& what) const {
  throw JsonPathError(childPath(key), what);
}

std::string JsonReader::requiredString(std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr) fail(key, "is required (a string)");
  if (!v->is_string()) fail(key, fmt::format("expected a string, got {}", v->type_name()));
  return v->get<std::string>();
}

std::string JsonReader::optionalString(std::string_view key, std::string fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail(key, fmt::format("expected a string, got {}", v->type_name()));
  return v->get<std::string>();
}

namespace {
bool readInteger(const json& v, std::int64_t& out) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return false;
    }
    out = v.get<std::int64_t>();
    return true;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    // The range first: converting a double outside int64's range is undefined behaviour.
    if (d < 9.2e18 && d > -9.2e18 && d == std::trunc(d)) {
      out = static_cast<std::int64_t>(d);
      return true;
    }
  }
  return false;
}
}  // namespace

std::int64_t JsonReader::requiredInt(std::string_view key, std::int64_t min,
                                     std::int64_t max) const {
  const json* v = find(key);
  if (v == nullptr) fail(key, "is required (an integer)");
  std::int64_t out = 0;
  if (!readInteger(*v, out)) fail(key, fmt::format("expected an integer, got {}", v->dump()));
  if (out < min || out > max) {
    fail(key, fmt::format("{} is out of range [{}, {}]", out, min, max));
  }
  return out;
}

std::int64_t JsonReader::optionalInt(std::string_view key, std::int64_t fallback, std::int64_t min,
                                     std::int64_t max) const {
  if (!has(key)) return fallback;
  return requiredInt(key, min, max);
}

std::uint64_t JsonReader::requiredUnsigned(std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr) fail(key, "is required (a non-negative integer)");
  if (v->is_number_unsigned()) return v->get<std::uint64_t>();
  std::int64_t out = 0;
  if (!readInteger(*v, out) || out < 0) {
    fail(key, fmt::format("expected a non-negative integer, got {}", v->dump()));
  }
  return static_cast<std::uint64_t>(out);
}

double JsonReader::optionalNumber(std::string_view key, double fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) fail(key, fmt::format("expected a number, got {}", v->type_name()));
  return v->get<double>();
}

bool JsonReader::optionalBool(std::string_view key, bool fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(key, fmt::format("expected true or false, got {}", v->dump()));
  return v->get<bool>();
}

std::map<std::string, std::string> JsonReader::optionalStringMap(std::string_view key) const {
  std::map<std::string, std::string> out;
  const json* v = find(key);
  if (v == nullptr) return out;
  if (!v->is_object()) fail(key, fmt::format("expected an object, got {}", v->type_name()));
  for (const auto& [k, value] : v->items()) {
    if (!value.is_string()) {
      throw JsonPathError(childPath(key) + "/" + escapePointerToken(k),
                          fmt::format("expected a string, got {}", value.type_name()));
    }
    out.emplace(k, value.get<std::string>());
  }
  return out;
}

std::vector<std::string> JsonReader::optionalStringList(std::string_view key) const {
  std::vector<std::string> out;
  const json* v = find(key);
  if (v == nullptr) return out;
  if (!v->is_array()) fail(key, fmt::format("expected an array, got {}", v->type_name()));
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      throw JsonPathError(childPath(key) + "/" + std::to_string(i),
                          fmt::format("expected a string, got {}", (*v)[i].type_name()));
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

JsonReader JsonReader::requiredObject(std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr) fail(key, "is required (an object)");
  return JsonReader(*v, childPath(key));
}

void JsonReader::rejectUnknown(const std::set<std::string, std::less<>>& known) const {
  for (const auto& [k, value] : object_.items()) {
    if (known.find(k) == known.end()) {
      std::string list;
      for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
      fail(k, fmt::format("unknown key (known keys: {})", list));
    }
  }
}

}  // namespace dockhand::protocol
