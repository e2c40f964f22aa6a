#include "resources/resource_discovery.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace dockhand::agent {

using nlohmann::json;

ResourceRequests mergeRequests(const ResourceRequests& profile, const ResourceRequests& local) {
  ResourceRequests out = profile;
  for (const auto& [name, request] : local) {
    auto& merged = out[name];
    if (request.amount > 0) merged.amount = request.amount;
    if (!request.discovery_script.empty()) merged.discovery_script = request.discovery_script;
    if (!request.vendor.empty()) merged.vendor = request.vendor;
  }
  return out;
}

DiscoveryChain::DiscoveryChain(std::vector<Discoverer*> discoverers, Discoverer* script_step)
    : discoverers_(std::move(discoverers)) {
  if (std::find(discoverers_.begin(), discoverers_.end(), script_step) == discoverers_.end()) {
    script_step_ = script_step;
  }
}

protocol::ResourceInfo DiscoveryChain::parseAnswer(const std::string& plugin,
                                                   const std::string& name,
                                                   const std::string& answer_json) {
  using Kind = ResourceError::Kind;
  const std::string where = fmt::format("resource '{}': plugin '{}'", name, plugin);
  json answer = json::parse(answer_json, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object()) {
    throw ResourceError(Kind::kMalformed,
                        fmt::format("{} answered with malformed output (expected a JSON object "
                                    R"({{"name": ..., "addresses": [...]}}): {})",
                                    where, answer_json.substr(0, 200)));
  }
  auto name_it = answer.find("name");
  if (name_it == answer.end() || !name_it->is_string()) {
    throw ResourceError(Kind::kMalformed, fmt::format("{} answered without a string \"name\": {}",
                                                      where, answer_json.substr(0, 200)));
  }
  if (*name_it != name) {
    throw ResourceError(Kind::kNameMismatch, fmt::format("{} answered for resource '{}', not '{}'",
                                                         where, name_it->get<std::string>(), name));
  }
  protocol::ResourceInfo info;
  info.name = name;
  if (auto it = answer.find("addresses"); it != answer.end() && !it->is_null()) {
    if (!it->is_array()) {
      throw ResourceError(Kind::kMalformed,
                          fmt::format("{}: \"addresses\" is not a list of strings", where));
    }
    std::set<std::string> seen;
    for (const auto& address : *it) {
      if (!address.is_string()) {
        throw ResourceError(Kind::kMalformed,
                            fmt::format("{}: \"addresses\" holds {} {}, not a string", where,
                                        address.type_name(), address.dump()));
      }
      if (address.get_ref<const std::string&>().empty()) {
        throw ResourceError(Kind::kEmptyAddress,
                            fmt::format("{} reported an empty address (\"\"), which no task "
                                        "could use; the resource is not offered",
                                        where));
      }
      if (!seen.insert(address.get<std::string>()).second) {
        throw ResourceError(Kind::kDuplicate, fmt::format("{} lists address '{}' twice", where,
                                                          address.get<std::string>()));
      }
      info.addresses.push_back(address.get<std::string>());
    }
  }
  return info;
}

std::map<std::string, DiscoveredResource> DiscoveryChain::discoverAll(
    const ResourceRequests& requests, const std::map<std::string, protocol::ResourceInfo>& given,
    const std::string& given_source) {
  using Kind = ResourceError::Kind;
  std::map<std::string, DiscoveredResource> found;
  // The file's allocations are taken as given, requested or not (Spark does the same).
  for (const auto& [name, info] : given) {
    DiscoveredResource r;
    r.info = info;
    r.source = given_source;
    if (auto it = requests.find(name); it != requests.end()) r.requested = it->second.amount;
    found[name] = std::move(r);
  }
  for (const auto& [name, request] : requests) {
    if (found.count(name) != 0) continue;
    // Spark drops a request for 0 (or less): nothing to find, nothing to refuse the start for.
    if (request.amount <= 0) continue;
    json request_json = {{"name", name}, {"amount", request.amount}};
    if (!request.vendor.empty()) request_json["vendor"] = request.vendor;
    if (!request.discovery_script.empty()) {
      request_json["discovery_script"] = request.discovery_script;
    }
    std::vector<std::string> declined;
    std::vector<Discoverer*> links = discoverers_;
    if (script_step_ != nullptr && !request.discovery_script.empty()) {
      links.push_back(script_step_);
    }
    for (Discoverer* d : links) {
      PluginResult result = d->discover(request_json.dump());
      if (result.status == DH_DECLINED) {
        declined.push_back(d->name());
        continue;
      }
      if (!result.ok()) {
        throw ResourceError(Kind::kPluginError, fmt::format("resource '{}': plugin '{}' failed: {}",
                                                            name, d->name(), result.error));
      }
      DiscoveredResource r;
      r.info = parseAnswer(d->name(), name, result.json);
      r.source = d->name();
      r.owner = d;
      found[name] = std::move(r);
      break;
    }
    if (found.count(name) == 0) {
      throw ResourceError(
          Kind::kInsufficient,
          fmt::format("resource '{}': {} requested, none found: {}", name, request.amount,
                      links.empty() ? std::string("no discovery plugin is loaded")
                                    : fmt::format("every discovery plugin declined ({})",
                                                  fmt::join(declined, ", "))));
    }
    found[name].requested = request.amount;
  }
  for (const auto& [name, r] : found) {
    if (static_cast<std::int64_t>(r.info.addresses.size()) < r.requested) {
      throw ResourceError(
          Kind::kInsufficient,
          fmt::format("resource '{}': {} requested, but {} found only {} address(es): [{}]", name,
                      r.requested, r.source, r.info.addresses.size(),
                      fmt::join(r.info.addresses, ", ")));
    }
  }
  return found;
}

int ResourceLedger::slotsPerAddress(double amount_per_task) {
  if (amount_per_task <= 0 || amount_per_task >= 1) return 1;
  // 1/3 -> 3: floor with a little slack for the binary representation of the fraction.
  return static_cast<int>(std::floor(1.0 / amount_per_task + 1e-9));
}

ResourceLedger::ResourceLedger(const std::map<std::string, DiscoveredResource>& resources,
                               const std::map<std::string, double>& amount_per_task) {
  for (const auto& [name, r] : resources) {
    auto it = amount_per_task.find(name);
    const int slots = slotsPerAddress(it == amount_per_task.end() ? 1.0 : it->second);
    slots_[name] = slots;
    for (const auto& address : r.info.addresses) free_[name][address] = slots;
  }
}

Result<void> ResourceLedger::acquire(std::uint64_t task_id,
                                     const std::map<std::string, std::vector<std::string>>& want) {
  if (held_.count(task_id) != 0)
    return Error(fmt::format("task {} already holds resources", task_id));
  for (const auto& [name, addresses] : want) {
    auto resource = free_.find(name);
    if (resource == free_.end()) {
      return Error(fmt::format("resource '{}' is not offered by this agent", name));
    }
    std::set<std::string> seen;
    for (const auto& address : addresses) {
      if (!seen.insert(address).second) {
        return Error(fmt::format("{} address '{}' is assigned twice to the task", name, address));
      }
      auto slot = resource->second.find(address);
      if (slot == resource->second.end()) {
        // A loop, not std::views::keys: clang 14 (clang-tidy) can't compile that view with
        // libstdc++ 12.
        std::vector<std::string> offered;
        offered.reserve(resource->second.size());
        for (const auto& [known, slots] : resource->second) offered.push_back(known);
        return Error(fmt::format("{} address '{}' is not one of this agent's ({})", name, address,
                                 fmt::join(offered, ", ")));
      }
      if (slot->second <= 0) {
        return Error(
            fmt::format("{} address '{}' is already in use by as many running tasks as its "
                        "share allows",
                        name, address));
      }
    }
  }
  for (const auto& [name, addresses] : want) {
    for (const auto& address : addresses) --free_[name][address];
  }
  held_[task_id] = want;
  return {};
}

void ResourceLedger::release(std::uint64_t task_id) {
  auto it = held_.find(task_id);
  if (it == held_.end()) return;
  for (const auto& [name, addresses] : it->second) {
    for (const auto& address : addresses) ++free_[name][address];
  }
  held_.erase(it);
}

int ResourceLedger::slotsPerAddress(const std::string& resource) const {
  auto it = slots_.find(resource);
  return it == slots_.end() ? 0 : it->second;
}

int ResourceLedger::freeSlots(const std::string& resource, const std::string& address) const {
  auto r = free_.find(resource);
  if (r == free_.end()) return 0;
  auto a = r->second.find(address);
  return a == r->second.end() ? 0 : a->second;
}

}  // namespace dockhand::agent
