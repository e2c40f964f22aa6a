#include "dockhand/protocol/envelope.h"

#include <fmt/format.h>

namespace dockhand::protocol {
namespace {

DecodeError fail(std::string_view code, std::string message, std::uint64_t id = 0) {
  return DecodeError{std::string(code), std::move(message), id};
}

// Reads an optional unsigned integer member; false when present but not one.
bool readUnsigned(const Json& object, const char* key, std::uint64_t& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_number_unsigned()) {
    if (it->is_number_integer() && it->get<std::int64_t>() >= 0) {
      out = it->get<std::uint64_t>();
      return true;
    }
    return false;
  }
  out = it->get<std::uint64_t>();
  return true;
}

// True when arrays and objects in `frame` nest deeper than `limit`. Brackets inside strings do
// not count. Runs before parsing, on text that may not even be JSON.
bool nestsDeeperThan(std::string_view frame, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : frame) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace

DecodeResult decodeEnvelope(std::string_view frame, std::size_t max_frame_bytes) {
  if (frame.size() > max_frame_bytes) {
    return fail(error_code::kFrameTooLarge,
                fmt::format("frame of {} bytes exceeds the limit of {} bytes", frame.size(),
                            max_frame_bytes));
  }
  if (frame.empty()) return fail(error_code::kMalformedFrame, "empty frame");
  // The parser takes a NUL byte for the end of input and would ignore whatever follows it; raw
  // NUL is never valid JSON text.
  if (frame.find('\0') != std::string_view::npos) {
    return fail(error_code::kMalformedFrame, "frame contains a NUL byte");
  }
  if (nestsDeeperThan(frame, kMaxNestingDepth)) {
    return fail(
        error_code::kMalformedFrame,
        fmt::format("frame nests arrays and objects deeper than {} levels", kMaxNestingDepth));
  }

  Json root = Json::parse(frame.begin(), frame.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return fail(error_code::kMalformedFrame, "frame is not valid JSON (truncated or corrupt)");
  }
  if (!root.is_object()) {
    return fail(error_code::kMalformedFrame,
                fmt::format("frame must be a JSON object, got {}", root.type_name()));
  }

  Envelope env;
  if (!readUnsigned(root, "id", env.id)) {
    return fail(error_code::kMalformedFrame, "/id must be a non-negative integer");
  }
  auto type = root.find("type");
  if (type == root.end() || !type->is_string() || type->get_ref<const std::string&>().empty()) {
    return fail(error_code::kMalformedFrame, "/type must be a non-empty string", env.id);
  }
  env.type = type->get<std::string>();
  if (env.type.size() > 64) {
    return fail(error_code::kMalformedFrame, "/type is longer than 64 characters", env.id);
  }
  if (!readUnsigned(root, "re", env.re)) {
    return fail(error_code::kMalformedFrame, "/re must be a non-negative integer", env.id);
  }
  if (auto ok = root.find("ok"); ok != root.end()) {
    if (!ok->is_boolean())
      return fail(error_code::kMalformedFrame, "/ok must be a boolean", env.id);
    env.ok = ok->get<bool>();
  }
  if (auto body = root.find("body"); body != root.end()) {
    if (!body->is_object() && !body->is_null()) {
      return fail(error_code::kMalformedFrame,
                  fmt::format("/body must be an object, got {}", body->type_name()), env.id);
    }
    env.body = std::move(*body);
  }
  if (auto error = root.find("error"); error != root.end() && !error->is_null()) {
    auto code = error->is_object() ? error->find("code") : error->end();
    auto message = error->is_object() ? error->find("message") : error->end();
    if (!error->is_object() || code == error->end() || !code->is_string() ||
        message == error->end() || !message->is_string()) {
      return fail(error_code::kMalformedFrame,
                  "/error must be an object with string members code and message", env.id);
    }
    env.error = ErrorInfo{code->get<std::string>(), message->get<std::string>()};
    if (env.isReply()) env.ok = false;
  }
  if (env.isReply()) {
    if (env.re == 0) return fail(error_code::kMalformedFrame, "a Reply needs /re > 0", env.id);
    if (!env.ok && !env.error) {
      return fail(error_code::kMalformedFrame, "a Reply with ok=false needs /error", env.id);
    }
  }
  if (env.isError() && !env.error) {
    return fail(error_code::kMalformedFrame, "an Error frame needs /error", env.id);
  }
  return env;
}

std::string encodeValue(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string encodeEnvelope(const Envelope& envelope) {
  // The members in the order a Json object keeps them (sorted), each written where it is: the
  // body is not copied into a tree of its own first.
  std::string out = "{";
  const auto member = [&out](std::string_view name) {
    if (out.size() > 1) out += ',';
    out += '"';
    out += name;
    out += "\":";
  };
  if (!envelope.body.is_null()) {
    member("body");
    out += encodeValue(envelope.body);
  }
  if (envelope.error) {
    member("error");
    out += encodeValue(Json{{"code", envelope.error->code}, {"message", envelope.error->message}});
  }
  if (envelope.id != 0) {
    member("id");
    out += std::to_string(envelope.id);
  }
  if (envelope.isReply()) {
    member("ok");
    out += envelope.ok ? "true" : "false";
    member("re");
    out += std::to_string(envelope.re);
  }
  member("type");
  out += encodeValue(Json(envelope.type));
  out += '}';
  return out;
}

Envelope makeReply(std::uint64_t re, Json body) {
  Envelope env;
  env.type = std::string(kReplyType);
  env.re = re;
  env.ok = true;
  env.body = std::move(body);
  return env;
}

Envelope makeErrorReply(std::uint64_t re, std::string_view code, std::string message) {
  Envelope env;
  env.type = std::string(kReplyType);
  env.re = re;
  env.ok = false;
  env.error = ErrorInfo{std::string(code), std::move(message)};
  return env;
}

Envelope makeError(std::string_view code, std::string message) {
  Envelope env;
  env.type = std::string(kErrorType);
  env.error = ErrorInfo{std::string(code), std::move(message)};
  return env;
}

}  // namespace dockhand::protocol
