// Agent config files (--config FILE and its FILE.d fragments): loadConfigJson must refuse bad
// text only with a ConfigError whose every problem names its origin, and a config it accepts
// must read back the same from configToJson's output (less "cores" when it is 0, not set). The
// whole-config rules (checkConfig: driver_url through Poco's URI parser, log_level) run on what was
// read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "app/agent_config.h"
#include "fuzz_check.h"

using dockhand::ConfigError;
using dockhand::agent::AgentConfig;
using dockhand::agent::ConfigOrigins;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  AgentConfig config;
  ConfigOrigins origins;
  try {
    dockhand::agent::loadConfigJson(text, "fuzz.json", config, &origins);
  } catch (const ConfigError& e) {
    DOCKHAND_FUZZ_CHECK(!e.problems().empty(), e.what());
    for (const auto& problem : e.problems()) {
      DOCKHAND_FUZZ_CHECK(problem.origin == "fuzz.json" && !problem.message.empty(),
                          problem.text());
    }
    return 0;
  }
  for (const auto& [path, origin] : origins) {
    DOCKHAND_FUZZ_CHECK(origin == "file:fuzz.json", (path + " -> ").append(origin));
  }
  for (const auto& problem : dockhand::agent::checkConfig(config, origins)) {
    DOCKHAND_FUZZ_CHECK(!problem.message.empty(), problem.text());
  }

  const auto shown = dockhand::agent::configToJson(config);
  // cores 0 means "not set" (the agent then offers the host's count); a file cannot say so.
  auto written = shown;
  if (config.cores == 0) written.erase("cores");
  AgentConfig again;
  try {
    dockhand::agent::loadConfigJson(written.dump(), "written.json", again);
  } catch (const ConfigError& e) {
    DOCKHAND_FUZZ_CHECK(false, "configToJson wrote a config that does not load: " + written.dump() +
                                   ": " + e.what());
  }
  DOCKHAND_FUZZ_CHECK(dockhand::agent::configToJson(again) == shown, shown.dump());
  // Redaction keeps the shape and never throws.
  const auto redacted = dockhand::agent::redactSecrets(shown);
  DOCKHAND_FUZZ_CHECK(redacted.size() == shown.size(), redacted.dump());
  return 0;
}
