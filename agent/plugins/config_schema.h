// A JSON Schema checker for plugin configs: the subset of draft 2020-12 that plugin configs
// need, small enough to read in one sitting (docs/plugins.md lists it for authors).
//
//   type                  "object" "array" "string" "integer" "number" "boolean" "null",
//                         or an array of those
//   properties            {name: schema}
//   required              [name, ...]
//   additionalProperties  false, or a schema for the properties not listed
//   enum                  [value, ...]          const   value
//   minimum, maximum      inclusive bounds on numbers
//   items                 a schema every element of an array must match
//   minItems, maxItems    bounds on an array's length
//   minLength, maxLength  bounds on a string's length (in bytes)
//   pattern               an ECMA-262 regular expression the string must match somewhere
//                         (anchor it with ^...$ to match the whole string)
//   format                "uri" only: an absolute URI (scheme:..., http(s) with a host);
//                         other formats are not enforced
//
// Other keywords ($schema, title, description, default, examples, ...) are ignored: they are
// not enforced, so a plugin must not rely on them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dockhand::agent {

struct SchemaProblem {
  std::string path;     // JSON pointer into the checked value, "" for the root
  std::string message;  // "expected integer, got string"
};

// Every place where `value` does not match `schema` (object keys in sorted order); empty when
// it matches.
std::vector<SchemaProblem> checkAgainstSchema(const nlohmann::json& value,
                                              const nlohmann::json& schema);

}  // namespace dockhand::agent
