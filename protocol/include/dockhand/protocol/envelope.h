// The frame layer of the wire protocol: one JSON object per WebSocket text frame.
//
//   {"type": "LaunchTask", "id": 12, "body": {...}}                 a message (an ask if id > 0
//                                                                    and the type is an ask)
//   {"type": "Reply", "re": 12, "ok": true, "body": {...}}          the answer to ask 12
//   {"type": "Reply", "re": 12, "ok": false,
//    "error": {"code": "duplicate_executor", "message": "..."}}     a refusal of ask 12
//   {"type": "Error", "error": {"code": "...", "message": "..."}}   a complaint about a frame
//                                                                    that could not be answered
//
// docs/protocol.md is the contract; this file is its implementation. Pure code: no sockets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dockhand/base/result.h"

namespace dockhand::protocol {

using Json = nlohmann::json;

// The protocol version sent in Hello. Bumped when a message changes incompatibly; adding an
// optional field or a new message does not bump it (receivers ignore unknown fields).
inline constexpr int kProtocolVersion = 1;

// Default limit on one frame's payload. Larger frames are refused and the connection closed.
inline constexpr std::size_t kDefaultMaxFrameBytes = std::size_t{16} * 1024 * 1024;

// Deepest nesting of arrays and objects a frame may have (the frame object itself is level 1).
// Deeper frames are refused as malformed before parsing: the JSON parser recurses per level,
// and a small frame of nested brackets would otherwise overflow the stack.
inline constexpr std::size_t kMaxNestingDepth = 128;

// Error codes carried in Reply/Error frames.
namespace error_code {
inline constexpr std::string_view kMalformedFrame = "malformed_frame";
inline constexpr std::string_view kFrameTooLarge = "frame_too_large";
inline constexpr std::string_view kUnknownType = "unknown_type";
inline constexpr std::string_view kInvalidBody = "invalid_body";
inline constexpr std::string_view kUnexpectedMessage = "unexpected_message";
inline constexpr std::string_view kProtocolVersion = "protocol_version";
inline constexpr std::string_view kDuplicateExecutor = "duplicate_executor";
inline constexpr std::string_view kRegistrationRefused = "registration_refused";
inline constexpr std::string_view kNotRegistered = "not_registered";
inline constexpr std::string_view kUnknownTask = "unknown_task";
inline constexpr std::string_view kTimeout = "timeout";
inline constexpr std::string_view kDisconnected = "disconnected";
inline constexpr std::string_view kInternal = "internal";
inline constexpr std::string_view kAuthFailed = "auth_failed";
inline constexpr std::string_view kNotResumable = "not_resumable";
}  // namespace error_code

struct ErrorInfo {
  std::string code;
  std::string message;
};

inline constexpr std::string_view kReplyType = "Reply";
inline constexpr std::string_view kErrorType = "Error";

struct Envelope {
  std::string type;
  std::uint64_t id = 0;  // > 0 on asks (and optionally on one-way messages); 0 = none
  std::uint64_t re = 0;  // on a Reply: the id of the ask it answers
  bool ok = true;        // on a Reply: false when `error` is set
  Json body;             // the message body (an object), or null
  std::optional<ErrorInfo> error;

  bool isReply() const { return type == kReplyType; }
  bool isError() const { return type == kErrorType; }
};

// Why a frame could not be decoded. `id` is the frame's id when it could be read, so that the
// receiver can answer an ask with a Reply instead of a bare Error.
struct DecodeError {
  std::string code;
  std::string message;
  std::uint64_t id = 0;
};

// Either an envelope or the reason there is none (the Result of dockhand/base/result.h, with
// the frame's id beside the error so that an ask can be answered).
using DecodeResult = Result<Envelope, DecodeError>;

// Decodes one frame. Never throws: malformed, truncated, oversized or non-object input comes
// back as a DecodeError with a code from error_code and a message a person can act on.
DecodeResult decodeEnvelope(std::string_view frame,
                            std::size_t max_frame_bytes = kDefaultMaxFrameBytes);

// Encodes an envelope as one line of compact JSON (no trailing newline).
std::string encodeEnvelope(const Envelope& envelope);
// A JSON value as every frame writes it: compact, invalid UTF-8 replaced rather than thrown on
// (a task's output may carry any bytes).
std::string encodeValue(const Json& value);

// Builders for the frames every endpoint sends.
Envelope makeReply(std::uint64_t re, Json body);
Envelope makeErrorReply(std::uint64_t re, std::string_view code, std::string message);
Envelope makeError(std::string_view code, std::string message);

}  // namespace dockhand::protocol
