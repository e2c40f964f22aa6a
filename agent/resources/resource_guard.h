// ResourceGuard: the agent's side of resource assignment, as a decorator on both directions of
// the task path: an Executor in front of the real one, and a TaskStatusSink in front of the
// Backend. Before a task starts it checks the addresses the LaunchTask carries against the
// ResourceLedger (never more tasks on an address than its share allows) and calls the owning
// discovery plugin's allocate hook; once the task ended, however it ended, it calls release
// and gives the addresses back. A violation fails the task before it starts, with the reason.
//
// Everything runs on the core thread: launch() there, and onTaskStatus(), which the executor
// calls there for every report before it passes it on to `next`.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/ports.h"
#include "resources/resource_discovery.h"

namespace dockhand::agent {

class ResourceGuard final : public Executor, public TaskStatusSink {
 public:
  // `inner` and `next` must outlive the guard; they are only stored here, so either may be
  // built after it. Until setResources(), no task may have any resource.
  ResourceGuard(Executor& inner, TaskStatusSink& next);
  // The resources this agent registered, and the profile's amount per task. The owners in
  // `resources` must outlive the guard. Call before the first launch.
  void setResources(const std::map<std::string, DiscoveredResource>& resources,
                    const std::map<std::string, double>& amount_per_task);

  Result<void> launch(const protocol::TaskDescription& task) override;
  bool kill(std::uint64_t task_id, bool interrupt, const std::string& reason) override {
    return inner_.kill(task_id, interrupt, reason);
  }
  std::optional<Json> threadDump(std::uint64_t task_id) override {
    return inner_.threadDump(task_id);
  }
  void stopAll(Millis grace) override { inner_.stopAll(grace); }
  std::vector<HandedOverTask> handOver() override { return inner_.handOver(); }

  // A task the agent's previous program handed over (a restart in place) still holds its
  // resources: they count in the ledger again and are allocated again with their plugins
  // before the executor takes it back, and are released when it ends, as a launched task's
  // are. An error when they no longer fit (the agent's resources changed across the restart)
  // or the executor cannot take it back: nothing is held then.
  Result<void> adopt(const HandedOverTask& task) override;

  // A terminal status releases the task's addresses, then every status goes on to `next`.
  void onTaskStatus(const TaskStatusEvent& status) override;

  const ResourceLedger& ledger() const { return ledger_; }

 private:
  // Counts `resources` for the task in the ledger and allocates them with their plugins; on an
  // error nothing is held.
  Result<void> hold(std::uint64_t task_id,
                    const std::map<std::string, std::vector<std::string>>& resources);
  void releaseTask(std::uint64_t task_id);

  Executor& inner_;
  TaskStatusSink& next_;
  std::map<std::string, Discoverer*> owners_;  // resource -> the plugin that found it
  ResourceLedger ledger_;
  // Allocations made per task: (plugin, allocation JSON), released in reverse.
  std::map<std::uint64_t, std::vector<std::pair<Discoverer*, std::string>>> allocations_;
};

}  // namespace dockhand::agent
