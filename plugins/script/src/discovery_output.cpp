#include "discovery_output.h"

#include <nlohmann/json.hpp>

namespace dockhand::plugins::script {

using nlohmann::json;

std::string excerpt(const std::string& text) {
  std::string out = text.size() > 2000 ? text.substr(0, 2000) + "..." : text;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out.empty() ? "(nothing)" : out;
}

std::vector<std::string> parseDiscoveryOutput(const std::string& out, const std::string& name) {
  json answer = json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object()) {
    throw DiscoveryOutputError(
        R"(printed no JSON object {"name": ..., "addresses": [...]}; stdout: )" + excerpt(out));
  }
  auto reported = answer.find("name");
  if (reported == answer.end() || !reported->is_string()) {
    throw DiscoveryOutputError(R"(printed an object without a string "name": )" + excerpt(out));
  }
  if (reported->get_ref<const std::string&>() != name) {
    throw DiscoveryOutputError("reported resource '" + reported->get<std::string>() + "', not '" +
                               name + "'");
  }
  std::vector<std::string> addresses;
  if (auto it = answer.find("addresses"); it != answer.end() && !it->is_null()) {
    if (!it->is_array()) {
      throw DiscoveryOutputError(R"(printed "addresses" that is not a list: )" + excerpt(out));
    }
    for (const auto& a : *it) {
      if (!a.is_string()) {
        throw DiscoveryOutputError("printed an address that is not a string: " + a.dump());
      }
      if (a.get_ref<const std::string&>().empty()) {
        // Spark's getGpusResources.sh prints this where nvidia-smi is missing or finds no GPU
        // (its pipeline turns nothing into one empty line). Spark would register it; a task
        // given it would get CUDA_VISIBLE_DEVICES= and no GPU.
        throw DiscoveryOutputError(
            R"(printed an empty address (""), which no task could use (Spark's )"
            "getGpusResources.sh prints that on a machine without nvidia-smi or without a "
            "GPU); stdout: " +
            excerpt(out));
      }
      addresses.push_back(a.get<std::string>());
    }
  }
  return addresses;
}

}  // namespace dockhand::plugins::script
