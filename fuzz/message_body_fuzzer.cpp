// Every message body, as it arrives: the input is "<Type>\n<body JSON>"; the body travels in a
// frame of that type through decodeEnvelope (so the frame layer's limits apply), then through
// the type's decoder. A decoder may refuse a body only with a BodyError naming a JSON path,
// and what it accepts must come out of toJson -> decoder -> toJson unchanged, and unchanged
// again after a trip over the wire (makeMessage -> encodeEnvelope -> decodeEnvelope).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"
#include "fuzz_check.h"

namespace proto = dockhand::protocol;
using proto::Json;

namespace {

void checkRefusal(const proto::BodyError& e, const std::string& body) {
  DOCKHAND_FUZZ_CHECK(!e.path().empty() && e.path().front() == '/',
                      "a refusal without a JSON path: " + std::string(e.what()) + " for " + body);
}

// T's decoder, then toJson -> decoder -> toJson. Returns the decoded value's JSON, or null
// when the body was refused.
template <typename T>
Json roundTrip(const Json& body) {
  T decoded;
  try {
    decoded = proto::decodeBody<T>(body);
  } catch (const proto::BodyError& e) {
    checkRefusal(e, body.dump());
    return nullptr;
  }
  Json encoded = proto::toJson(decoded);
  DOCKHAND_FUZZ_CHECK(encoded.is_object(), encoded.dump());
  T again;
  try {
    again = proto::decodeBody<T>(encoded);
  } catch (const proto::BodyError& e) {
    DOCKHAND_FUZZ_CHECK(
        false, "the encoding of an accepted body is refused: " + encoded.dump() + ": " + e.what());
  }
  DOCKHAND_FUZZ_CHECK(proto::toJson(again) == encoded, "round trip changed " + encoded.dump() +
                                                           " into " + proto::toJson(again).dump());
  return encoded;
}

// A message type: also over the wire in a frame of its own.
template <typename M>
void message(const Json& body) {
  const Json encoded = roundTrip<M>(body);
  if (encoded.is_null()) return;
  const std::string frame = proto::encodeEnvelope(proto::makeMessage(proto::decodeBody<M>(body)));
  auto received = proto::decodeEnvelope(frame);
  DOCKHAND_FUZZ_CHECK(received.ok(), "a message's own frame does not decode: " + frame);
  DOCKHAND_FUZZ_CHECK(received.value().type == proto::specOf(M::kType).name, frame);
  DOCKHAND_FUZZ_CHECK(proto::toJson(proto::decodeBody<M>(received.value().body)) == encoded,
                      "the message changed over the wire: " + frame);
}

void peers(const Json& body) {
  std::vector<proto::Peer> list;
  try {
    list = proto::parsePeers(body.is_null() ? Json::object() : body);
  } catch (const proto::BodyError& e) {
    checkRefusal(e, body.dump());
    return;
  }
  const Json encoded = proto::toJson(list);
  DOCKHAND_FUZZ_CHECK(proto::toJson(proto::parsePeers(encoded)) == encoded, encoded.dump());
}

const std::map<std::string, std::function<void(const Json&)>, std::less<>>& decoders() {
  static const std::map<std::string, std::function<void(const Json&)>, std::less<>> kTable = {
      {"Hello", message<proto::Hello>},
      {"Authenticate", message<proto::Authenticate>},
      {"RetrieveAppConfig", message<proto::RetrieveAppConfig>},
      {"RegisterExecutor", message<proto::RegisterExecutor>},
      {"LaunchedExecutor", message<proto::LaunchedExecutor>},
      {"LaunchTask", message<proto::LaunchTask>},
      {"KillTask", message<proto::KillTask>},
      {"StatusUpdate", message<proto::StatusUpdate>},
      {"StopExecutor", message<proto::StopExecutor>},
      {"Shutdown", message<proto::Shutdown>},
      {"UpdateDelegationTokens", message<proto::UpdateDelegationTokens>},
      {"UpdateExecutorLogLevel", message<proto::UpdateExecutorLogLevel>},
      {"DecommissionExecutor", message<proto::DecommissionExecutor>},
      {"ExecutorDecommissioning", message<proto::ExecutorDecommissioning>},
      {"TaskThreadDump", message<proto::TaskThreadDump>},
      {"RemoveExecutor", message<proto::RemoveExecutor>},
      {"Heartbeat", message<proto::Heartbeat>},
      {"GetPeers", message<proto::GetPeers>},
      {"UpdateBlockInfo", message<proto::UpdateBlockInfo>},
      {"ResumeExecutor", message<proto::ResumeExecutor>},
      // Reply bodies and the values inside messages.
      {"AppConfig", [](const Json& b) { roundTrip<proto::AppConfig>(b); }},
      {"ResourceProfile", [](const Json& b) { roundTrip<proto::ResourceProfile>(b); }},
      {"BlockInfo", [](const Json& b) { roundTrip<proto::BlockInfo>(b); }},
      {"ResumeAccepted", [](const Json& b) { roundTrip<proto::ResumeAccepted>(b); }},
      {"Peers", peers},
  };
  return kTable;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto newline = input.find('\n');
  if (newline == std::string_view::npos) return 0;
  const auto decoder = decoders().find(input.substr(0, newline));
  if (decoder == decoders().end()) return 0;
  // Every message of the protocol has its decoder here.
  static const bool kComplete = [] {
    for (const auto& spec : proto::allMessages()) {
      DOCKHAND_FUZZ_CHECK(decoders().count(spec.name) == 1, std::string(spec.name));
    }
    return true;
  }();
  (void)kComplete;

  const std::string frame =
      R"({"type":"Body","body":)" + std::string(input.substr(newline + 1)) + "}";
  auto decoded = proto::decodeEnvelope(frame);
  if (!decoded.ok()) return 0;
  decoder->second(decoded.value().body);
  return 0;
}
