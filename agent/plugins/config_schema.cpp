#include "plugins/config_schema.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <string_view>

#include "dockhand/protocol/json_reader.h"

namespace dockhand::agent {
namespace {

using nlohmann::json;

std::string typeOf(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::null:
      return "null";
    default:
      return "unknown";
  }
}

bool hasType(const json& value, const std::string& type) {
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    // 2.0 is an integer in JSON Schema.
    if (value.is_number_float()) {
      const double d = value.get<double>();
      return d == static_cast<double>(static_cast<long long>(d));
    }
    return false;
  }
  return typeOf(value) == type;
}

// A count keyword's value: a non-negative integer (parsed JSON holds it unsigned, JSON built
// in C++ may hold it signed).
bool isCount(const json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<long long>() >= 0);
}

// RFC 3986's absolute URI, checked for its shape: a scheme, ':', then only characters a URI
// may hold (percent-encodings well formed); http and https also need "//" and a host.
bool isUri(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == 0 || colon == std::string_view::npos ||
      std::isalpha(static_cast<unsigned char>(text[0])) == 0) {
    return false;
  }
  for (const char c : text.substr(0, colon)) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  const std::string_view rest = text.substr(colon + 1);
  if (rest.empty()) return false;
  constexpr std::string_view kAllowed = "-._~:/?#[]@!$&'()*+,;=";
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const auto c = static_cast<unsigned char>(rest[i]);
    if (c == '%') {
      if (i + 2 >= rest.size() || std::isxdigit(static_cast<unsigned char>(rest[i + 1])) == 0 ||
          std::isxdigit(static_cast<unsigned char>(rest[i + 2])) == 0) {
        return false;
      }
      i += 2;
    } else if (c >= 0x80 || (std::isalnum(c) == 0 &&
                             kAllowed.find(static_cast<char>(c)) == std::string_view::npos)) {
      return false;
    }
  }
  std::string scheme(text.substr(0, colon));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme == "http" || scheme == "https") {
    if (rest.substr(0, 2) != "//") return false;
    const std::string_view authority = rest.substr(2, rest.find_first_of("/?#", 2) - 2);
    const auto at = authority.rfind('@');
    const std::string_view host_port =
        at == std::string_view::npos ? authority : authority.substr(at + 1);
    if (host_port.empty() || host_port[0] == ':') return false;
  }
  return true;
}

std::string shortJson(const json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

class Checker {
 public:
  std::vector<SchemaProblem> problems;

  void check(const json& value, const json& schema, const std::string& path) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) add(path, "no value is allowed here");
      return;
    }
    if (!schema.is_object()) return;
    if (auto it = schema.find("type"); it != schema.end() && !checkType(value, *it, path)) {
      return;  // the rest would only repeat the type mismatch
    }
    if (auto it = schema.find("enum"); it != schema.end() && it->is_array()) {
      if (std::find(it->begin(), it->end(), value) == it->end()) {
        std::string allowed;
        for (const auto& option : *it) allowed += (allowed.empty() ? "" : ", ") + option.dump();
        add(path, "expected one of " + allowed + ", got " + shortJson(value));
      }
    }
    if (auto it = schema.find("const"); it != schema.end() && value != *it) {
      add(path, "expected " + it->dump() + ", got " + shortJson(value));
    }
    if (value.is_number()) checkNumber(value, schema, path);
    if (value.is_string()) checkString(value, schema, path);
    if (value.is_array()) checkArray(value, schema, path);
    if (value.is_object()) checkObject(value, schema, path);
  }

 private:
  void add(const std::string& path, std::string message) {
    problems.push_back(SchemaProblem{path, std::move(message)});
  }

  bool checkType(const json& value, const json& type, const std::string& path) {
    std::vector<std::string> types;
    if (type.is_string()) {
      types.push_back(type.get<std::string>());
    } else if (type.is_array()) {
      for (const auto& t : type) {
        if (t.is_string()) types.push_back(t.get<std::string>());
      }
    }
    if (types.empty()) return true;
    for (const auto& t : types) {
      if (hasType(value, t)) return true;
    }
    std::string expected;
    for (std::size_t i = 0; i < types.size(); ++i) {
      if (i > 0) expected += i + 1 == types.size() ? " or " : ", ";
      expected += types[i];
    }
    add(path, "expected " + expected + ", got " + typeOf(value));
    return false;
  }

  void checkNumber(const json& value, const json& schema, const std::string& path) {
    const double v = value.get<double>();
    if (auto it = schema.find("minimum"); it != schema.end() && it->is_number()) {
      if (v < it->get<double>()) add(path, "must be >= " + it->dump() + ", got " + value.dump());
    }
    if (auto it = schema.find("maximum"); it != schema.end() && it->is_number()) {
      if (v > it->get<double>()) add(path, "must be <= " + it->dump() + ", got " + value.dump());
    }
  }

  void checkString(const json& value, const json& schema, const std::string& path) {
    const auto length = value.get_ref<const std::string&>().size();
    if (auto it = schema.find("minLength"); it != schema.end() && isCount(*it)) {
      if (length < it->get<std::size_t>()) {
        add(path, "must be at least " + it->dump() + " characters long");
      }
    }
    if (auto it = schema.find("maxLength"); it != schema.end() && isCount(*it)) {
      if (length > it->get<std::size_t>()) {
        add(path, "must be at most " + it->dump() + " characters long");
      }
    }
    const auto& text = value.get_ref<const std::string&>();
    if (auto it = schema.find("pattern"); it != schema.end() && it->is_string()) {
      checkPattern(text, it->get_ref<const std::string&>(), path);
    }
    if (auto it = schema.find("format"); it != schema.end() && *it == "uri" && !isUri(text)) {
      add(path, "expected a URI (scheme:..., such as https://host/path), got " + shortJson(value));
    }
  }

  // JSON Schema's pattern: an ECMA-262 regular expression that matches somewhere in the text
  // (not anchored unless it says so). A pattern that does not compile is the schema's fault,
  // said as such, so that the plugin is refused rather than the value let through.
  void checkPattern(const std::string& text, const std::string& pattern, const std::string& path) {
    try {
      if (!std::regex_search(text, std::regex(pattern, std::regex::ECMAScript))) {
        add(path,
            "must match the pattern " + json(pattern).dump() + ", got " + shortJson(json(text)));
      }
    } catch (const std::regex_error& e) {
      add(path,
          "the schema's pattern " + json(pattern).dump() + " cannot be used (" + e.what() + ")");
    }
  }

  void checkArray(const json& value, const json& schema, const std::string& path) {
    if (auto it = schema.find("minItems"); it != schema.end() && isCount(*it)) {
      if (value.size() < it->get<std::size_t>()) {
        add(path,
            "expected at least " + it->dump() + " items, got " + std::to_string(value.size()));
      }
    }
    if (auto it = schema.find("maxItems"); it != schema.end() && isCount(*it)) {
      if (value.size() > it->get<std::size_t>()) {
        add(path, "expected at most " + it->dump() + " items, got " + std::to_string(value.size()));
      }
    }
    if (auto it = schema.find("items"); it != schema.end()) {
      for (std::size_t i = 0; i < value.size(); ++i) {
        check(value[i], *it, path + "/" + std::to_string(i));
      }
    }
  }

  void checkObject(const json& value, const json& schema, const std::string& path) {
    if (auto it = schema.find("required"); it != schema.end() && it->is_array()) {
      for (const auto& name : *it) {
        if (name.is_string() && !value.contains(name.get<std::string>())) {
          add(path + "/" + protocol::escapePointerToken(name.get<std::string>()), "is required");
        }
      }
    }
    const json* properties = nullptr;
    if (auto it = schema.find("properties"); it != schema.end() && it->is_object()) {
      properties = &*it;
    }
    const json* additional = nullptr;
    if (auto it = schema.find("additionalProperties"); it != schema.end()) additional = &*it;
    for (const auto& [name, member] : value.items()) {
      const std::string member_path = path + "/" + protocol::escapePointerToken(name);
      if (properties != nullptr) {
        if (auto p = properties->find(name); p != properties->end()) {
          check(member, *p, member_path);
          continue;
        }
      }
      if (additional == nullptr) continue;
      if (additional->is_boolean()) {
        if (!additional->get<bool>()) add(member_path, "unknown key (not allowed by the schema)");
      } else {
        check(member, *additional, member_path);
      }
    }
  }
};

}  // namespace

std::vector<SchemaProblem> checkAgainstSchema(const nlohmann::json& value,
                                              const nlohmann::json& schema) {
  Checker checker;
  checker.check(value, schema, "");
  return std::move(checker.problems);
}

}  // namespace dockhand::agent
