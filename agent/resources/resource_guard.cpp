#include "resources/resource_guard.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dockhand/base/logging.h"

namespace dockhand::agent {

ResourceGuard::ResourceGuard(Executor& inner, TaskStatusSink& next)
    : inner_(inner), next_(next), ledger_({}, {}) {}

void ResourceGuard::setResources(const std::map<std::string, DiscoveredResource>& resources,
                                 const std::map<std::string, double>& amount_per_task) {
  ledger_ = ResourceLedger(resources, amount_per_task);
  owners_.clear();
  for (const auto& [name, r] : resources) owners_[name] = r.owner;
}

Result<void> ResourceGuard::hold(std::uint64_t task_id,
                                 const std::map<std::string, std::vector<std::string>>& resources) {
  if (resources.empty()) return {};
  if (auto taken = ledger_.acquire(task_id, resources); !taken) {
    return Error("resource assignment refused: " + taken.error().message);
  }
  auto& done = allocations_[task_id];
  for (const auto& [name, addresses] : resources) {
    Discoverer* owner = owners_[name];
    if (owner == nullptr) continue;  // from the resources file: no plugin to call
    const std::string allocation =
        nlohmann::json{{"task_id", task_id}, {"name", name}, {"addresses", addresses}}.dump();
    PluginResult result = owner->allocate(allocation);
    if (!result.ok()) {
      releaseTask(task_id);
      return Error(fmt::format("plugin '{}' could not allocate {} {}: {}", owner->name(), name,
                               allocation, result.error));
    }
    done.emplace_back(owner, allocation);
  }
  return {};
}

Result<void> ResourceGuard::launch(const protocol::TaskDescription& task) {
  if (auto held = hold(task.task_id, task.resources); !held) return held;
  auto launched = inner_.launch(task);
  if (!launched) releaseTask(task.task_id);
  return launched;
}

Result<void> ResourceGuard::adopt(const HandedOverTask& task) {
  if (auto held = hold(task.task_id, task.resources); !held) return held;
  auto adopted = inner_.adopt(task);
  if (!adopted) releaseTask(task.task_id);
  return adopted;
}

void ResourceGuard::onTaskStatus(const TaskStatusEvent& status) {
  if (protocol::isTerminal(status.state)) releaseTask(status.task_id);
  next_.onTaskStatus(status);
}

void ResourceGuard::releaseTask(std::uint64_t task_id) {
  if (auto it = allocations_.find(task_id); it != allocations_.end()) {
    // Last allocated, first released.
    std::for_each(it->second.rbegin(), it->second.rend(), [&](const auto& allocation) {
      const auto& [owner, request] = allocation;
      PluginResult result = owner->release(request);
      if (!result.ok()) {
        logger("agent")->warn("task {}: plugin '{}' could not release {}: {}", task_id,
                              owner->name(), request, result.error);
      }
    });
    allocations_.erase(it);
  }
  ledger_.release(task_id);
}

}  // namespace dockhand::agent
