// The frame layer: decodeEnvelope must turn every input, however broken, into either an
// envelope or a DecodeError with a documented code, and never crash or throw.
#include "dockhand/protocol/envelope.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dockhand/protocol/messages.h"

namespace dockhand::protocol {
namespace {

// Decodes a frame that must be refused and returns the refusal.
DecodeError refusal(std::string_view frame, std::size_t limit = kDefaultMaxFrameBytes) {
  DecodeResult result = decodeEnvelope(frame, limit);
  EXPECT_FALSE(result.ok()) << "accepted: " << frame;
  if (result.ok()) return DecodeError{.code = "<accepted>", .message = "", .id = 0};
  return result.error();
}

// Decodes a frame that must be accepted.
Envelope accepted(std::string_view frame) {
  DecodeResult result = decodeEnvelope(frame);
  EXPECT_TRUE(result.ok()) << frame << " -> " << (result.ok() ? "" : result.error().message);
  if (!result.ok()) return Envelope{};
  return result.value();
}

// A valid frame with most kinds of JSON value in it: nested objects and arrays, strings with
// escapes and non-ASCII text, negative and fractional numbers, booleans and null.
std::string richFrame() {
  TaskDescription task;
  task.task_id = 4242;
  task.attempt = 2;
  task.name = "stage 3 \"map\" ünïcødé 日本";
  task.partition = 17;
  task.cpus = 2;
  task.resources = {{"gpu", {"0", "1"}}};
  task.properties = {{"spark.job.description", "line1\nline2\ttab"}};
  task.payload = {{"command", {"/bin/sh", "-c", R"(echo '[{\"x\"}]')"}},
                  {"env", {{"A", "1"}}},
                  {"weights", {1.5, -2, 0, nullptr, true, false}}};
  return encodeEnvelope(makeMessage(LaunchTask{.task = task}, 9));
}

// ---- Valid frames -------------------------------------------------------------------------

TEST(EnvelopeTest, RoundTripsMessageWithIdAndBody) {
  Envelope env;
  env.type = "KillTask";
  env.id = 12;
  env.body = {{"task_id", 3}, {"reason", "stage cancelled"}};
  DecodeResult decoded = decodeEnvelope(encodeEnvelope(env));
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(decoded.value().type, "KillTask");
  EXPECT_EQ(decoded.value().id, 12u);
  EXPECT_EQ(decoded.value().re, 0u);
  EXPECT_TRUE(decoded.value().ok);
  EXPECT_FALSE(decoded.value().error.has_value());
  EXPECT_EQ(decoded.value().body, env.body);
}

TEST(EnvelopeTest, EncodesCompactFrameWithoutIdWhenIdIsZero) {
  Envelope env;
  env.type = "Heartbeat";
  env.body = {{"running_tasks", 0}};
  EXPECT_EQ(encodeEnvelope(env), R"({"body":{"running_tasks":0},"type":"Heartbeat"})");
}

TEST(EnvelopeTest, EncodesNoBodyMemberWhenBodyIsNull) {
  Envelope env;
  env.type = "StopExecutor";
  EXPECT_EQ(encodeEnvelope(env), R"({"type":"StopExecutor"})");
  Envelope back = accepted(encodeEnvelope(env));
  EXPECT_TRUE(back.body.is_null());
}

// encodeEnvelope writes the members itself; its text is what a Json tree of the same members
// dumps to (sorted keys, compact, invalid UTF-8 replaced).
TEST(EnvelopeTest, EncodesTheSameTextAsATreeOfItsMembers) {
  const auto tree = [](const Envelope& e) {
    Json root = Json::object();
    root["type"] = e.type;
    if (e.id != 0) root["id"] = e.id;
    if (e.isReply()) {
      root["re"] = e.re;
      root["ok"] = e.ok;
    }
    if (!e.body.is_null()) root["body"] = e.body;
    if (e.error) root["error"] = {{"code", e.error->code}, {"message", e.error->message}};
    return root.dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  std::vector<Envelope> cases;
  cases.push_back(makeMessage(StopExecutor{}));
  cases.push_back(makeReply(7, {{"z", 1}, {"a", {1, 2}}}));
  cases.push_back(makeReply(18446744073709551615u, nullptr));
  cases.push_back(makeErrorReply(3, error_code::kMalformedFrame, "bad \"quote\"\n"));
  cases.push_back(makeError(error_code::kUnknownType, "no such type"));
  Envelope odd;
  odd.type = "Type\xff with bad UTF-8";
  odd.id = 42;
  odd.body = {{"text", "caf\xc3"}, {"nested", {{"empty", Json::object()}}}};
  cases.push_back(odd);
  Envelope empty_body;
  empty_body.type = "Heartbeat";
  empty_body.id = 1;
  empty_body.body = Json::object();
  cases.push_back(empty_body);
  for (const Envelope& e : cases) EXPECT_EQ(encodeEnvelope(e), tree(e)) << e.type;
}

TEST(EnvelopeTest, EncodesOneLineEvenWhenStringsHoldNewlines) {
  Envelope env;
  env.type = "StatusUpdate";
  env.body = {{"stderr_tail", "a\nb\r\nc"}};
  std::string frame = encodeEnvelope(env);
  EXPECT_EQ(frame.find('\n'), std::string::npos);
  EXPECT_EQ(frame.find('\r'), std::string::npos);
  EXPECT_EQ(accepted(frame).body["stderr_tail"], "a\nb\r\nc");
}

TEST(EnvelopeTest, AcceptsLargestId) {
  Envelope env = accepted(R"({"type":"Heartbeat","id":18446744073709551615})");
  EXPECT_EQ(env.id, 18446744073709551615u);
}

TEST(EnvelopeTest, TreatsNullMembersAsAbsent) {
  Envelope env = accepted(R"({"type":"Heartbeat","id":null,"re":null,"body":null,"error":null})");
  EXPECT_EQ(env.id, 0u);
  EXPECT_EQ(env.re, 0u);
  EXPECT_TRUE(env.body.is_null());
  EXPECT_FALSE(env.error.has_value());
}

TEST(EnvelopeTest, IgnoresUnknownMembers) {
  Envelope env = accepted(
      R"({"type":"Heartbeat","id":4,"trace":{"span":[1,2]},"zzz":"later version","body":{}})");
  EXPECT_EQ(env.type, "Heartbeat");
  EXPECT_EQ(env.id, 4u);
  EXPECT_EQ(env.body, Json::object());
}

TEST(EnvelopeTest, ToleratesWhitespaceAroundAndInsideFrame) {
  Envelope env = accepted(" \n\t{ \"type\" : \"Heartbeat\" , \"id\" : 2 }\r\n ");
  EXPECT_EQ(env.type, "Heartbeat");
  EXPECT_EQ(env.id, 2u);
}

TEST(EnvelopeTest, DecodesUnknownTypeAsEnvelopeForTheReceiverToRefuse) {
  // The frame layer does not know the message set: an unknown type is a valid envelope, and
  // findMessage() is how a receiver learns it must answer unknown_type.
  Envelope env = accepted(R"({"type":"LaunchRocket","id":5,"body":{}})");
  EXPECT_EQ(env.type, "LaunchRocket");
  EXPECT_EQ(env.id, 5u);
  EXPECT_EQ(findMessage(env.type), nullptr);
}

TEST(EnvelopeTest, KeepsNonAsciiTextIntact) {
  Envelope env;
  env.type = "UpdateExecutorLogLevel";
  env.body = {{"level", "débug ✓ 𝄞"}};
  EXPECT_EQ(accepted(encodeEnvelope(env)).body["level"], "débug ✓ 𝄞");
}

// ---- Limits -------------------------------------------------------------------------------

TEST(EnvelopeTest, RefusesFrameOverLimit) {
  std::string frame = R"({"type":"Heartbeat"})";
  DecodeError error = refusal(frame, frame.size() - 1);
  EXPECT_EQ(error.code, error_code::kFrameTooLarge);
  EXPECT_NE(error.message.find(std::to_string(frame.size())), std::string::npos) << error.message;
}

TEST(EnvelopeTest, AcceptsFrameExactlyAtLimit) {
  std::string frame = R"({"type":"Heartbeat"})";
  EXPECT_TRUE(decodeEnvelope(frame, frame.size()).ok());
}

TEST(EnvelopeTest, RefusesFrameOverDefaultLimitOfSixteenMebibytes) {
  EXPECT_EQ(kDefaultMaxFrameBytes, 16u * 1024 * 1024);
  std::string prefix = R"({"type":"StatusUpdate","body":{"stderr_tail":")";
  std::string suffix = R"("}})";
  std::string frame =
      prefix + std::string(kDefaultMaxFrameBytes - prefix.size() - suffix.size(), 'x') + suffix;
  ASSERT_EQ(frame.size(), kDefaultMaxFrameBytes);
  EXPECT_TRUE(decodeEnvelope(frame).ok());
  frame.insert(prefix.size(), "y");
  EXPECT_EQ(refusal(frame).code, error_code::kFrameTooLarge);
}

TEST(EnvelopeTest, ChecksSizeBeforeParsing) {
  // Even garbage over the limit is reported as too large, not as malformed: the receiver closes
  // the connection on frame_too_large.
  EXPECT_EQ(refusal(std::string(100, '{'), 10).code, error_code::kFrameTooLarge);
}

TEST(EnvelopeTest, AcceptsNestingAtDepthLimit) {
  // The frame object is level 1 and body level 2, so the body's content may nest limit-2 deep.
  std::string inner =
      std::string(kMaxNestingDepth - 2, '[') + std::string(kMaxNestingDepth - 2, ']');
  std::string frame = R"({"type":"X","body":{"a":)" + inner + "}}";
  EXPECT_TRUE(decodeEnvelope(frame).ok());
}

TEST(EnvelopeTest, RefusesNestingBeyondDepthLimit) {
  std::string inner =
      std::string(kMaxNestingDepth - 1, '[') + std::string(kMaxNestingDepth - 1, ']');
  std::string frame = R"({"type":"X","body":{"a":)" + inner + "}}";
  EXPECT_EQ(refusal(frame).code, error_code::kMalformedFrame);
}

TEST(EnvelopeTest, RefusesDeeplyNestedFrameWithoutCrashing) {
  // A few hundred kilobytes of brackets overflow a recursive parser's stack.
  std::string frame =
      R"({"type":"X","body":{"a":)" + std::string(500000, '[') + std::string(500000, ']') + "}}";
  EXPECT_EQ(refusal(frame).code, error_code::kMalformedFrame);
  EXPECT_EQ(refusal(std::string(1000000, '[')).code, error_code::kMalformedFrame);
  EXPECT_EQ(refusal(std::string(1000000, '{')).code, error_code::kMalformedFrame);
}

TEST(EnvelopeTest, DoesNotCountBracketsInsideStringsAsNesting) {
  std::string brackets(10000, '[');
  Envelope env = accepted(R"({"type":"X","body":{"s":")" + brackets + R"(\"[[[{"}})");
  EXPECT_EQ(env.body["s"], brackets + "\"[[[{");
}

// ---- Malformed frames ---------------------------------------------------------------------

TEST(EnvelopeTest, RefusesEmptyFrame) { EXPECT_EQ(refusal("").code, error_code::kMalformedFrame); }

TEST(EnvelopeTest, RefusesTextThatIsNotJson) {
  for (std::string_view frame :
       {"hello", "{", "}", "{type: \"Heartbeat\"}", "{'type':'Heartbeat'}", R"({"type":"X",})",
        R"({"type":"X"} trailing)", R"({"type":"X"}{"type":"Y"})", "\x01\x02\x03",
        R"({"type":"X","id":01})", R"({"type":"X","id":NaN})", "   "}) {
    EXPECT_EQ(refusal(frame).code, error_code::kMalformedFrame) << frame;
  }
}

TEST(EnvelopeTest, RefusesNulByteAnywhere) {
  // A JSON parser may stop at NUL; the frame must not pass with whatever follows ignored.
  using namespace std::string_view_literals;
  for (std::string_view frame :
       {"{\"type\":\"X\"}\0"sv, "{\"type\":\"X\"}\0{\"type\":\"Y\"}"sv,
        "{\"type\":\"X\"}\0garbage"sv, "\0{\"type\":\"X\"}"sv, "{\"type\":\"X\0\"}"sv}) {
    EXPECT_EQ(refusal(frame).code, error_code::kMalformedFrame) << frame.size();
  }
}

TEST(EnvelopeTest, RefusesJsonThatIsNotAnObject) {
  for (std::string_view frame :
       {"[]", R"([{"type":"Heartbeat"}])", "1", "-0.5", "\"Heartbeat\"", "null", "true", "false"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
    EXPECT_NE(error.message.find("object"), std::string::npos) << error.message;
  }
}

TEST(EnvelopeTest, RefusesRawInvalidUtf8InFrame) {
  EXPECT_EQ(refusal("{\"type\":\"X\",\"body\":{\"s\":\"\xff\xfe\"}}").code,
            error_code::kMalformedFrame);
  EXPECT_EQ(refusal("{\"type\":\"X\",\"body\":{\"s\":\"\xc3\"}}").code,
            error_code::kMalformedFrame);
}

TEST(EnvelopeTest, TruncationAtEveryOffsetIsRefusedWithoutCrashing) {
  std::string frame = richFrame();
  ASSERT_TRUE(decodeEnvelope(frame).ok());
  for (std::size_t length = 0; length < frame.size(); ++length) {
    DecodeResult result = decodeEnvelope(std::string_view(frame).substr(0, length));
    // Every proper prefix of a JSON object is incomplete, so none may be accepted.
    ASSERT_FALSE(result.ok()) << "prefix of " << length << " bytes accepted";
    EXPECT_EQ(result.error().code, error_code::kMalformedFrame) << "prefix of " << length;
  }
}

TEST(EnvelopeTest, TruncationOfPaddedFrameGivesEnvelopeOrMalformed) {
  // With trailing whitespace some prefixes are complete frames: those must decode to the same
  // envelope; every other prefix must be malformed.
  std::string frame = richFrame();
  Envelope whole = accepted(frame);
  std::string padded = frame + " \n";
  for (std::size_t length = 0; length <= padded.size(); ++length) {
    DecodeResult result = decodeEnvelope(std::string_view(padded).substr(0, length));
    if (result.ok()) {
      EXPECT_GE(length, frame.size());
      EXPECT_EQ(result.value().type, whole.type);
      EXPECT_EQ(result.value().body, whole.body);
    } else {
      EXPECT_LT(length, frame.size());
      EXPECT_EQ(result.error().code, error_code::kMalformedFrame);
    }
  }
}

TEST(EnvelopeTest, CorruptionOfAnySingleByteNeverCrashes) {
  std::string frame = richFrame();
  for (std::size_t i = 0; i < frame.size(); ++i) {
    for (char c : {'\0', '"', '{', '}', '\\', '\xff', 'x'}) {
      std::string corrupt = frame;
      corrupt[i] = c;
      DecodeResult result = decodeEnvelope(corrupt);
      if (!result.ok()) {
        EXPECT_EQ(result.error().code, error_code::kMalformedFrame) << "byte " << i;
      }
    }
  }
}

TEST(EnvelopeTest, RefusesMissingOrBadType) {
  for (std::string_view frame :
       {R"({})", R"({"id":1})", R"({"type":null})", R"({"type":""})", R"({"type":7})",
        R"({"type":true})", R"({"type":["Heartbeat"]})", R"({"type":{"name":"Heartbeat"}})"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
    EXPECT_NE(error.message.find("/type"), std::string::npos) << error.message;
  }
}

TEST(EnvelopeTest, RefusesTypeLongerThanSixtyFourCharacters) {
  std::string ok_type(64, 'T');
  EXPECT_EQ(accepted(R"({"type":")" + ok_type + R"("})").type, ok_type);
  EXPECT_EQ(refusal(R"({"type":")" + std::string(65, 'T') + R"("})").code,
            error_code::kMalformedFrame);
}

TEST(EnvelopeTest, RefusesBadId) {
  for (std::string_view frame :
       {R"({"type":"X","id":-1})", R"({"type":"X","id":1.5})", R"({"type":"X","id":1.0})",
        R"({"type":"X","id":"1"})", R"({"type":"X","id":true})", R"({"type":"X","id":[1]})",
        R"({"type":"X","id":18446744073709551616})", R"({"type":"X","id":1e30})"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
    EXPECT_NE(error.message.find("/id"), std::string::npos) << error.message;
  }
}

TEST(EnvelopeTest, ReportsIdOfRefusedFrameSoTheAskCanBeAnswered) {
  EXPECT_EQ(refusal(R"({"id":7,"type":5})").id, 7u);
  EXPECT_EQ(refusal(R"({"type":"KillTask","id":8,"body":[1]})").id, 8u);
  EXPECT_EQ(refusal(R"({"type":"KillTask","id":9,"re":-3})").id, 9u);
  EXPECT_EQ(refusal(R"({"type":"KillTask","id":10,"ok":1})").id, 10u);
  EXPECT_EQ(refusal(R"({"type":"KillTask","id":11,"error":"bad"})").id, 11u);
  EXPECT_EQ(refusal(R"({"type":"X","id":-2})").id, 0u);
  EXPECT_EQ(refusal("not json").id, 0u);
}

TEST(EnvelopeTest, RefusesBadRe) {
  for (std::string_view frame :
       {R"({"type":"Reply","re":-1,"ok":true})", R"({"type":"Reply","re":"4","ok":true})",
        R"({"type":"Reply","re":2.5,"ok":true})"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
    EXPECT_NE(error.message.find("/re"), std::string::npos) << error.message;
  }
}

TEST(EnvelopeTest, RefusesOkThatIsNotBoolean) {
  for (std::string_view frame :
       {R"({"type":"Reply","re":1,"ok":"true"})", R"({"type":"Reply","re":1,"ok":1})",
        R"({"type":"Reply","re":1,"ok":null})"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
    EXPECT_NE(error.message.find("/ok"), std::string::npos) << error.message;
  }
}

TEST(EnvelopeTest, RefusesBodyThatIsNotAnObject) {
  for (std::string_view frame : {R"({"type":"X","body":[]})", R"({"type":"X","body":"{}"})",
                                 R"({"type":"X","body":0})", R"({"type":"X","body":false})"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
    EXPECT_NE(error.message.find("/body"), std::string::npos) << error.message;
  }
}

TEST(EnvelopeTest, RefusesMalformedErrorMember) {
  for (std::string_view frame :
       {R"({"type":"Error","error":"boom"})", R"({"type":"Error","error":[]})",
        R"({"type":"Error","error":{}})", R"({"type":"Error","error":{"code":"internal"}})",
        R"({"type":"Error","error":{"message":"boom"}})",
        R"({"type":"Error","error":{"code":1,"message":"boom"}})",
        R"({"type":"Error","error":{"code":"internal","message":null}})",
        R"({"type":"Reply","re":1,"ok":false,"error":{"code":"x"}})"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
    EXPECT_NE(error.message.find("/error"), std::string::npos) << error.message;
  }
}

// ---- Reply and Error ----------------------------------------------------------------------

TEST(EnvelopeTest, MakeReplyRoundTrips) {
  Envelope reply = makeReply(12, {{"accepted", true}});
  EXPECT_TRUE(reply.isReply());
  EXPECT_FALSE(reply.isError());
  EXPECT_EQ(encodeEnvelope(reply),
            R"({"body":{"accepted":true},"ok":true,"re":12,"type":"Reply"})");
  Envelope back = accepted(encodeEnvelope(reply));
  EXPECT_TRUE(back.isReply());
  EXPECT_EQ(back.re, 12u);
  EXPECT_EQ(back.id, 0u);
  EXPECT_TRUE(back.ok);
  EXPECT_FALSE(back.error.has_value());
  EXPECT_EQ(back.body, (Json{{"accepted", true}}));
}

TEST(EnvelopeTest, MakeReplyWithoutBodyRoundTrips) {
  Envelope back = accepted(encodeEnvelope(makeReply(3, nullptr)));
  EXPECT_TRUE(back.ok);
  EXPECT_EQ(back.re, 3u);
  EXPECT_TRUE(back.body.is_null());
}

TEST(EnvelopeTest, MakeErrorReplyRoundTrips) {
  Envelope reply = makeErrorReply(5, error_code::kDuplicateExecutor, "executor 3 is registered");
  EXPECT_FALSE(reply.ok);
  Envelope back = accepted(encodeEnvelope(reply));
  EXPECT_TRUE(back.isReply());
  EXPECT_EQ(back.re, 5u);
  EXPECT_FALSE(back.ok);
  ASSERT_TRUE(back.error.has_value());
  EXPECT_EQ(back.error->code, "duplicate_executor");
  EXPECT_EQ(back.error->message, "executor 3 is registered");
}

TEST(EnvelopeTest, MakeErrorRoundTrips) {
  Envelope error = makeError(error_code::kFrameTooLarge, "frame of 20 MiB");
  EXPECT_TRUE(error.isError());
  EXPECT_EQ(encodeEnvelope(error),
            R"({"error":{"code":"frame_too_large","message":"frame of 20 MiB"},"type":"Error"})");
  Envelope back = accepted(encodeEnvelope(error));
  EXPECT_TRUE(back.isError());
  EXPECT_FALSE(back.isReply());
  ASSERT_TRUE(back.error.has_value());
  EXPECT_EQ(back.error->code, "frame_too_large");
  EXPECT_EQ(back.error->message, "frame of 20 MiB");
}

TEST(EnvelopeTest, RefusesReplyWithoutRe) {
  for (std::string_view frame :
       {R"({"type":"Reply","ok":true,"body":{}})", R"({"type":"Reply","re":0,"ok":true})"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
    EXPECT_NE(error.message.find("/re"), std::string::npos) << error.message;
  }
}

TEST(EnvelopeTest, RefusesFailedReplyWithoutError) {
  DecodeError error = refusal(R"({"type":"Reply","re":4,"ok":false})");
  EXPECT_EQ(error.code, error_code::kMalformedFrame);
  EXPECT_NE(error.message.find("/error"), std::string::npos) << error.message;
}

TEST(EnvelopeTest, ReplyWithoutOkMeansSuccess) {
  Envelope env = accepted(R"({"type":"Reply","re":4,"body":{"x":1}})");
  EXPECT_TRUE(env.ok);
}

TEST(EnvelopeTest, ReplyCarryingErrorIsAFailureEvenIfOkSaysTrue) {
  Envelope env =
      accepted(R"({"type":"Reply","re":4,"ok":true,"error":{"code":"internal","message":"m"}})");
  EXPECT_FALSE(env.ok);
  ASSERT_TRUE(env.error.has_value());
  EXPECT_EQ(env.error->code, "internal");
}

TEST(EnvelopeTest, RefusesErrorFrameWithoutError) {
  for (std::string_view frame : {R"({"type":"Error"})", R"({"type":"Error","error":null})"}) {
    DecodeError error = refusal(frame);
    EXPECT_EQ(error.code, error_code::kMalformedFrame) << frame;
  }
}

TEST(EnvelopeTest, AcceptsErrorCodesItDoesNotKnow) {
  // Codes are open-ended: a newer peer may send one this build has never heard of.
  Envelope env = accepted(R"({"type":"Error","error":{"code":"quota_exceeded","message":"m"}})");
  EXPECT_EQ(env.error->code, "quota_exceeded");
}

TEST(EnvelopeTest, ErrorCodesHaveTheirDocumentedWireNames) {
  EXPECT_EQ(error_code::kMalformedFrame, "malformed_frame");
  EXPECT_EQ(error_code::kFrameTooLarge, "frame_too_large");
  EXPECT_EQ(error_code::kUnknownType, "unknown_type");
  EXPECT_EQ(error_code::kInvalidBody, "invalid_body");
  EXPECT_EQ(error_code::kUnexpectedMessage, "unexpected_message");
  EXPECT_EQ(error_code::kProtocolVersion, "protocol_version");
  EXPECT_EQ(error_code::kDuplicateExecutor, "duplicate_executor");
  EXPECT_EQ(error_code::kRegistrationRefused, "registration_refused");
  EXPECT_EQ(error_code::kNotRegistered, "not_registered");
  EXPECT_EQ(error_code::kUnknownTask, "unknown_task");
  EXPECT_EQ(error_code::kTimeout, "timeout");
  EXPECT_EQ(error_code::kDisconnected, "disconnected");
  EXPECT_EQ(error_code::kInternal, "internal");
  EXPECT_EQ(kProtocolVersion, 1);
}

// ---- Invalid UTF-8 from tasks -------------------------------------------------------------

TEST(EnvelopeTest, EncodesInvalidUtf8WithoutThrowing) {
  StatusUpdate update;
  update.executor_id = "7";
  update.task_id = 1;
  update.state = TaskState::kFailed;
  update.exit_code = 2;
  update.stderr_tail = "bad \xff\xfe bytes \xc3";
  update.result = {{"stdout", "ok \x80 then text"}};
  std::string frame;
  ASSERT_NO_THROW(frame = encodeEnvelope(makeMessage(update)));
  // The bytes that are not UTF-8 become U+FFFD; the rest is kept, and the frame decodes.
  Envelope back = accepted(frame);
  auto decoded = decodeBody<StatusUpdate>(back.body);
  EXPECT_EQ(decoded.stderr_tail, "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes \xEF\xBF\xBD");
  EXPECT_EQ(decoded.result["stdout"], "ok \xEF\xBF\xBD then text");
}

TEST(EnvelopeTest, EncodesInvalidUtf8InErrorMessageWithoutThrowing) {
  std::string frame;
  ASSERT_NO_THROW(frame = encodeEnvelope(makeErrorReply(1, error_code::kInternal, "\xff")));
  EXPECT_EQ(accepted(frame).error->message, "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace dockhand::protocol
