// A task's result value on the wire (docs/protocol.md, "StatusUpdate"): the bytes a task
// returned travel as {"value": text} when they are UTF-8, else as {"value_base64": text}; a
// process task's output travels as {"stdout": text}. This file is that rule, once: the library
// runner writes it, the driver writes it for a result it fetched from a block, and the driver's
// report and `run --results-dir` read it back.
//
// Pure code, standard library and nlohmann_json only (no Poco, no spdlog), position-independent,
// so a plugin links it too.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "dockhand/base/result.h"

namespace dockhand::protocol {

// Whether `bytes` are well-formed UTF-8: no overlong forms, no surrogates, nothing above
// U+10FFFF, nothing cut short.
bool isUtf8(std::string_view bytes);

// Standard base64 (RFC 4648 section 4) with padding and no line breaks.
std::string base64Encode(std::string_view bytes);
// The bytes of standard base64 text (padding required where the length needs it; no
// whitespace). An error names the offset of the first character that is not base64.
Result<std::string> base64Decode(std::string_view text);

// Sets result["value"] (UTF-8 bytes) or result["value_base64"] (other bytes) on the object
// `result`.
void putResultValue(nlohmann::json& result, std::string_view bytes);

// The whole bytes a FINISHED result carries: its "stdout", its "value", or its "value_base64"
// decoded. An error when `result` carries none of them (a result left in a block not yet
// fetched, or no result at all) or its base64 does not decode.
Result<std::string> resultBytes(const nlohmann::json& result);

}  // namespace dockhand::protocol
