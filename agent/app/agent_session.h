// The agent's session on disk: <work_dir>/session.json names the driver session this work
// directory belongs to, so that the agent's next process — after a restart in place (SIGUSR2),
// a package upgrade or a crash — resumes it (protocol.md 6.6) with the blocks it still holds
// instead of registering as a stranger, whose blocks the driver would have to make again.
//
// Written once the driver has taken the agent (registered or resumed), removed when the
// session ends for good (a stop the driver was told of, a decommission, a refused resume).
// A crash leaves it, which is the point. A restart in place rewrites it with the tasks it hands
// over; the next program takes them back and writes it again without them once it runs.
//
// The file is versioned: {"format": "dockhand-session", "version": 1, ...}. This agent reads
// version 1 and ignores members it does not know, so the next minor version may add some;
// a newer major version, a malformed file or one of another format is an error that names
// the file (the agent then registers anew: the driver reruns what it had counted there).
// Written atomically: a temporary file, fsynced, renamed over the old one, directory fsynced.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/ports.h"
#include "dockhand/base/result.h"

namespace dockhand::agent {

struct AgentSession {
  static constexpr int kVersion = 1;
  std::string app_id;
  std::string executor_id;
  std::string driver_url;
  std::uint64_t pid = 0;              // the process that wrote it
  std::uint64_t written_unix_ms = 0;  // when
  std::string agent_version;          // the agent's version string, for the log
  // Written by a restart in place: the running tasks handed over to the next program, which
  // takes them back (member "tasks": [{"task_id", "runner", "handle", "cpus", "resources"}];
  // absent: none).
  std::vector<HandedOverTask> tasks;
};

// <work_dir>/session.json
std::filesystem::path sessionPath(const std::filesystem::path& work_dir);

// nullopt when there is no file; an Error naming the file when it cannot be used.
Result<std::optional<AgentSession>> readSession(const std::filesystem::path& path);
Result<void> writeSession(const std::filesystem::path& path, const AgentSession& session);
// Removes the file; a missing one is not an error.
Result<void> removeSession(const std::filesystem::path& path);
// Moves an unusable file aside (<path>.unusable), so that the next start does not trip on it.
void setSessionAside(const std::filesystem::path& path);

// Whether `session` is this agent's: same application, executor and driver.
bool sameSession(const AgentSession& session, const std::string& app_id,
                 const std::string& executor_id, const std::string& driver_url);

}  // namespace dockhand::agent
