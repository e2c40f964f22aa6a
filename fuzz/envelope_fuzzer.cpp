// Frames as a driver or an agent receives them: decodeEnvelope must never throw or crash, and
// what it accepts must survive encodeEnvelope -> decodeEnvelope unchanged. The driver's direct
// reader of StatusUpdate frames (readStatusUpdateFrame) reads only frames the tree codec reads as
// a StatusUpdate, into the same message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/task_frames.h"
#include "fuzz_check.h"

using dockhand::protocol::decodeEnvelope;
using dockhand::protocol::encodeEnvelope;
using dockhand::protocol::Envelope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);

  if (size > 0) {
    auto small = decodeEnvelope(frame, size - 1);
    DOCKHAND_FUZZ_CHECK(!small.ok() && small.error().code == "frame_too_large",
                        "a frame over the limit was not refused as too large");
  }

  auto decoded = decodeEnvelope(frame);
  if (auto fast = dockhand::protocol::readStatusUpdateFrame(
          frame, dockhand::protocol::kDefaultMaxFrameBytes)) {
    DOCKHAND_FUZZ_CHECK(
        decoded.ok() && decoded.value().type == "StatusUpdate" && decoded.value().id == 0,
        "the direct reader read a frame the tree codec does not read as a "
        "StatusUpdate");
    dockhand::protocol::StatusUpdate tree;
    try {
      tree = dockhand::protocol::decodeBody<dockhand::protocol::StatusUpdate>(decoded.value().body);
    } catch (const dockhand::protocol::BodyError& e) {
      DOCKHAND_FUZZ_CHECK(
          false, std::string("the direct reader read a body the tree refuses: ") + e.what());
    }
    DOCKHAND_FUZZ_CHECK(tree == *fast, "the two readers read different messages");
  }
  if (!decoded.ok()) {
    DOCKHAND_FUZZ_CHECK(!decoded.error().code.empty() && !decoded.error().message.empty(),
                        "a refusal without a code or a message");
    return 0;
  }
  const Envelope& first = decoded.value();
  DOCKHAND_FUZZ_CHECK(!first.type.empty() && first.type.size() <= 64, first.type);
  DOCKHAND_FUZZ_CHECK(first.body.is_null() || first.body.is_object(), first.body.dump());
  if (first.isReply()) DOCKHAND_FUZZ_CHECK(first.re > 0, "a Reply without re");

  const std::string encoded = encodeEnvelope(first);
  auto again = decodeEnvelope(encoded);
  DOCKHAND_FUZZ_CHECK(again.ok(), "the encoding of a decoded frame does not decode: " + encoded +
                                      " (" + (again.ok() ? "" : again.error().message) + ")");
  const Envelope& second = again.value();
  DOCKHAND_FUZZ_CHECK(second.type == first.type && second.id == first.id, encoded);
  if (first.isReply()) {
    DOCKHAND_FUZZ_CHECK(second.re == first.re && second.ok == first.ok, encoded);
  }
  DOCKHAND_FUZZ_CHECK(second.error.has_value() == first.error.has_value(), encoded);
  if (first.error) {
    DOCKHAND_FUZZ_CHECK(
        second.error->code == first.error->code && second.error->message == first.error->message,
        encoded);
  }
  DOCKHAND_FUZZ_CHECK(encodeEnvelope(second) == encoded, "encoding is not stable: " + encoded);
  return 0;
}
