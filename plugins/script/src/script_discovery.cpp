// The `script` discovery plugin: Spark's resource discovery scripts, unchanged.
//
// The script for a resource is the request's discovery_script (the app's resource profile,
// as Spark's spark.executor.resource.<name>.discoveryScript) or, failing that, the one this
// plugin's config names for it:
//   {"scripts": {"gpu": "/opt/spark/getGpusResources.sh"}, "timeout_ms": 60000}
// It runs with no arguments; its stdout must be one JSON object {"name": ..., "addresses":
// [...]} (extra fields ignored, a missing list meaning none); its stderr is logged, never
// parsed. A resource with no script is declined.
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "discovery_output.h"
#include "dockhand/plugin.hpp"
#include "run_script.h"

namespace {

using dockhand::sdk::Error;
using nlohmann::json;

using dockhand::plugins::script::excerpt;

class ScriptDiscovery : public dockhand::sdk::ResourceDiscovery {
 public:
  static constexpr const char* kConfigSchema = R"({
    "type": "object",
    "properties": {
      "scripts": {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}},
      "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 3600000}
    },
    "additionalProperties": false
  })";

  ScriptDiscovery(dockhand::sdk::Host host, std::string_view config_json) : host_(host) {
    json config = json::parse(config_json);
    if (config.contains("scripts")) {
      scripts_ = config["scripts"].get<std::map<std::string, std::string>>();
    }
    timeout_ = std::chrono::milliseconds(config.value("timeout_ms", 60000));
  }

  std::optional<std::string> discover(std::string_view request_json) override {
    const json request = json::parse(request_json);
    const std::string name = request.at("name").get<std::string>();
    std::string script = request.value("discovery_script", std::string());
    if (script.empty()) {
      auto it = scripts_.find(name);
      if (it == scripts_.end()) return std::nullopt;
      script = it->second;
    }
    const std::string what = "resource '" + name + "': discovery script " + script;
    struct stat st {};
    if (::stat(script.c_str(), &st) != 0) throw Error(DH_ERROR, what + " does not exist");
    if (!S_ISREG(st.st_mode)) throw Error(DH_ERROR, what + " is not a regular file");
    if (::access(script.c_str(), X_OK) != 0) {
      throw Error(DH_ERROR, what + " is not executable (chmod +x it)");
    }

    dockhand::plugins::BoundedRun run;
    try {
      run = dockhand::plugins::script::runScript(script, timeout_);
    } catch (const std::exception& e) {
      throw Error(DH_ERROR, what + ": " + e.what());
    }
    std::istringstream err_lines(run.err);
    const std::string prefix = name + " discovery script: ";
    for (std::string line; std::getline(err_lines, line);) host_.info(prefix + line);
    if (run.timed_out) {
      throw Error(DH_ERROR, what + " timed out after " + std::to_string(timeout_.count()) +
                                " ms (killed; raise timeout_ms in the script plugin's config)");
    }
    if (run.signal != 0 || run.exit_code != 0) {
      const std::string how = run.signal != 0 ? "was killed by signal " + std::to_string(run.signal)
                                              : "exited with code " + std::to_string(run.exit_code);
      host_.error(what + " " + how + "; stdout: " + excerpt(run.out) +
                  "; stderr: " + excerpt(run.err));
      throw Error(DH_ERROR, what + " " + how + " (stderr: " + excerpt(run.err) + ")");
    }
    std::vector<std::string> addresses;
    try {
      addresses = dockhand::plugins::script::parseDiscoveryOutput(run.out, name);
    } catch (const dockhand::plugins::script::DiscoveryOutputError& e) {
      throw Error(DH_ERROR, what + " " + e.what());
    }
    return json{{"name", name}, {"addresses", addresses}}.dump();  // extra fields dropped
  }

 private:
  dockhand::sdk::Host host_;
  std::map<std::string, std::string> scripts_;
  std::chrono::milliseconds timeout_{60000};
};

}  // namespace

DOCKHAND_PLUGIN(ScriptDiscovery, "script", "0.1.0", "Runs Spark-style resource discovery scripts")
