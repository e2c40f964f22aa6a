// The resources part of the agent's status output (the block server's GET /v1/status): per
// registered resource its addresses, the plugin that found them and what that plugin
// describes (an `nvidia` GPU's name, UUID and memory), the per-task amount from the app's
// profile, and which running task holds which address now.
//
// Pure: the caller gathers the inputs on the core thread, where the ledger lives.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "resources/resource_discovery.h"

namespace dockhand::agent {

// How many addresses a resource has, and how many of them a running task holds.
struct AddressUse {
  std::size_t total = 0;
  std::size_t in_use = 0;
};

// Per registered resource, its AddressUse (what /metrics shows).
std::map<std::string, AddressUse> addressUse(
    const std::map<std::string, DiscoveredResource>& resources, const ResourceLedger& ledger);

// {"gpu": {"addresses": ["0", "1"], "found_by": "nvidia", "requested": 2,
//          "amount_per_task": 0.25, "tasks_per_address": 4, "details": {...},
//          "allocation": {"0": {"held_by": [7], "free": 3}, "1": {"held_by": [], "free": 4}},
//          "tasks": [{"task_id": 7, "addresses": ["0"], "amount": 0.25}]}}
// `described` maps a discovery plugin's name to its describe() answer; `details` is the
// answer of the plugin that found the resource (null for a resources file's allocation).
nlohmann::json resourceStatusJson(const std::map<std::string, DiscoveredResource>& resources,
                                  const std::map<std::string, double>& amount_per_task,
                                  const ResourceLedger& ledger,
                                  const std::map<std::string, nlohmann::json>& described);

}  // namespace dockhand::agent
