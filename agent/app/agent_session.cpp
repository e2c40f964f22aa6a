#include "app/agent_session.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace dockhand::agent {
namespace {

constexpr const char* kFormat = "dockhand-session";

Error fileError(const std::filesystem::path& path, const std::string& what) {
  return Error("session file " + path.string() + ": " + what);
}

std::string errnoText(int error) { return std::strerror(error); }

Result<void> fsyncFd(int fd, const std::filesystem::path& path) {
  if (::fsync(fd) != 0) return fileError(path, "cannot fsync: " + errnoText(errno));
  return {};
}

}  // namespace

std::filesystem::path sessionPath(const std::filesystem::path& work_dir) {
  return work_dir / "session.json";
}

bool sameSession(const AgentSession& session, const std::string& app_id,
                 const std::string& executor_id, const std::string& driver_url) {
  return session.app_id == app_id && session.executor_id == executor_id &&
         session.driver_url == driver_url;
}

Result<std::optional<AgentSession>> readSession(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    return std::optional<AgentSession>();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return fileError(path, "cannot open it");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return fileError(path, "not a JSON object (torn or damaged)");
  }
  if (json.value("format", std::string()) != kFormat) {
    return fileError(path, std::string(R"("format" is not ")") + kFormat + "\"");
  }
  const auto version = json.find("version");
  if (version == json.end() || !version->is_number_integer()) {
    return fileError(path, "\"version\" is missing or not an integer");
  }
  if (version->get<int>() != AgentSession::kVersion) {
    return fileError(path, "written in session format " + std::to_string(version->get<int>()) +
                               " (by another version of the agent); this agent reads format " +
                               std::to_string(AgentSession::kVersion));
  }
  AgentSession session;
  try {
    session.app_id = json.at("app_id").get<std::string>();
    session.executor_id = json.at("executor_id").get<std::string>();
    session.driver_url = json.at("driver_url").get<std::string>();
    session.pid = json.value("pid", std::uint64_t{0});
    session.written_unix_ms = json.value("written_unix_ms", std::uint64_t{0});
    session.agent_version = json.value("agent_version", std::string());
    if (const auto tasks = json.find("tasks"); tasks != json.end()) {
      for (const auto& entry : tasks->get_ref<const nlohmann::json::array_t&>()) {
        HandedOverTask task;
        task.task_id = entry.at("task_id").get<std::uint64_t>();
        task.runner = entry.at("runner").get<std::string>();
        task.handle = entry.at("handle");
        task.cpus = entry.value("cpus", 0);
        task.resources = entry.value("resources", decltype(task.resources){});
        session.tasks.push_back(std::move(task));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return fileError(path, std::string("a member is missing or of the wrong type: ") + e.what());
  }
  if (session.executor_id.empty()) return fileError(path, "\"executor_id\" is empty");
  return std::optional<AgentSession>(std::move(session));
}

Result<void> writeSession(const std::filesystem::path& path, const AgentSession& session) {
  nlohmann::json json = {{"format", kFormat},
                         {"version", AgentSession::kVersion},
                         {"app_id", session.app_id},
                         {"executor_id", session.executor_id},
                         {"driver_url", session.driver_url},
                         {"pid", session.pid},
                         {"written_unix_ms", session.written_unix_ms},
                         {"agent_version", session.agent_version}};
  if (!session.tasks.empty()) {
    auto& tasks = json["tasks"] = nlohmann::json::array();
    for (const HandedOverTask& task : session.tasks) {
      tasks.push_back({{"task_id", task.task_id},
                       {"runner", task.runner},
                       {"handle", task.handle},
                       {"cpus", task.cpus},
                       {"resources", task.resources}});
    }
  }
  const std::string text = json.dump(2) + "\n";
  const std::filesystem::path temp = path.string() + ".new";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fileError(temp, "cannot create: " + errnoText(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      return fileError(temp, "cannot write: " + errnoText(error));
    }
    done += static_cast<std::size_t>(n);
  }
  Result<void> synced = fsyncFd(fd, temp);
  ::close(fd);
  if (!synced) {
    ::unlink(temp.c_str());
    return synced;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return fileError(path, "cannot rename " + temp.string() + " into place: " + errnoText(error));
  }
  const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return fileError(path, "cannot open its directory: " + errnoText(errno));
  synced = fsyncFd(dir_fd, dir);
  ::close(dir_fd);
  return synced;
}

Result<void> removeSession(const std::filesystem::path& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fileError(path, "cannot remove: " + errnoText(errno));
  }
  return {};
}

void setSessionAside(const std::filesystem::path& path) {
  const std::filesystem::path aside = path.string() + ".unusable";
  ::rename(path.c_str(), aside.c_str());
}

}  // namespace dockhand::agent
