// Task descriptions, the richest body a driver sends: the input is the JSON of one task
// description, which travels as a LaunchTask frame through decodeEnvelope and the decoder the
// agent's Backend runs. Refusals are BodyErrors under /task; an accepted description must
// survive toJson -> decoder unchanged, and its input blocks go through the checks the
// executor makes before fetching (block id, checksum form).
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "blocks/block_id.h"
#include "blocks/checksum.h"
#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"
#include "fuzz_check.h"

namespace proto = dockhand::protocol;
using proto::Json;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string frame = R"({"type":"LaunchTask","body":{"task":)" + std::string(input) + "}}";
  auto decoded = proto::decodeEnvelope(frame);
  if (!decoded.ok()) return 0;

  proto::TaskDescription task;
  try {
    task = proto::decodeBody<proto::LaunchTask>(decoded.value().body).task;
  } catch (const proto::BodyError& e) {
    DOCKHAND_FUZZ_CHECK(e.path().rfind("/task", 0) == 0, e.what());
    return 0;
  }
  DOCKHAND_FUZZ_CHECK(
      !task.runner.empty() && task.cpus >= 0 && task.attempt >= 0 && task.partition >= 0,
      proto::toJson(task).dump());

  const Json encoded = proto::toJson(task);
  proto::TaskDescription again;
  try {
    again = proto::fromJson(encoded, proto::Tag<proto::TaskDescription>{});
  } catch (const proto::BodyError& e) {
    DOCKHAND_FUZZ_CHECK(
        false, "the encoding of an accepted task is refused: " + encoded.dump() + ": " + e.what());
  }
  DOCKHAND_FUZZ_CHECK(proto::toJson(again) == encoded, encoded.dump());
  DOCKHAND_FUZZ_CHECK(again.inputs.size() == task.inputs.size(), encoded.dump());

  for (const auto& block : task.inputs) {
    if (dockhand::agent::isValidBlockId(block.id)) {
      DOCKHAND_FUZZ_CHECK(block.id.find('/') == std::string::npos, block.id);
    }
    if (auto value = dockhand::agent::parseChecksum(block.checksum)) {
      // Hex digits are read in either case and written in lower case.
      std::string lower = block.checksum;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      DOCKHAND_FUZZ_CHECK(dockhand::agent::formatChecksum(*value) == lower, block.checksum);
    }
  }
  return 0;
}
