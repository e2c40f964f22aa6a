#include "resources/resource_status.h"

#include <set>

namespace dockhand::agent {

using nlohmann::json;

std::map<std::string, AddressUse> addressUse(
    const std::map<std::string, DiscoveredResource>& resources, const ResourceLedger& ledger) {
  std::map<std::string, AddressUse> out;
  for (const auto& [name, r] : resources) {
    std::set<std::string> held;
    for (const auto& [task_id, by_resource] : ledger.held()) {
      auto mine = by_resource.find(name);
      if (mine != by_resource.end()) held.insert(mine->second.begin(), mine->second.end());
    }
    AddressUse& use = out[name];
    use.total = r.info.addresses.size();
    for (const auto& address : r.info.addresses) use.in_use += held.count(address);
  }
  return out;
}

json resourceStatusJson(const std::map<std::string, DiscoveredResource>& resources,
                        const std::map<std::string, double>& amount_per_task,
                        const ResourceLedger& ledger,
                        const std::map<std::string, json>& described) {
  json out = json::object();
  for (const auto& [name, r] : resources) {
    auto amount = amount_per_task.find(name);
    const double per_task = amount == amount_per_task.end() ? 1.0 : amount->second;
    json details = nullptr;
    if (r.owner != nullptr) {
      if (auto it = described.find(r.owner->name()); it != described.end()) details = it->second;
    }
    json allocation = json::object();
    for (const auto& address : r.info.addresses) {
      allocation[address] = {{"held_by", json::array()}, {"free", ledger.freeSlots(name, address)}};
    }
    json tasks = json::array();
    for (const auto& [task_id, held] : ledger.held()) {
      auto mine = held.find(name);
      if (mine == held.end()) continue;
      for (const auto& address : mine->second) {
        if (allocation.contains(address)) allocation[address]["held_by"].push_back(task_id);
      }
      tasks.push_back({{"task_id", task_id}, {"addresses", mine->second}, {"amount", per_task}});
    }
    out[name] = {{"addresses", r.info.addresses},
                 {"found_by", r.source},
                 {"requested", r.requested},
                 {"amount_per_task", per_task},
                 {"tasks_per_address", ledger.slotsPerAddress(name)},
                 {"details", std::move(details)},
                 {"allocation", std::move(allocation)},
                 {"tasks", std::move(tasks)}};
  }
  return out;
}

}  // namespace dockhand::agent
