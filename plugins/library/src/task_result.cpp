#include "task_result.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include <nlohmann/json.hpp>

#include "dockhand/plugin.h"
#include "dockhand/protocol/result_value.h"

namespace dockhand::plugins::library {
namespace {

using nlohmann::json;

// Writes `bytes` to `path` (replacing it); "" or why not.
std::string writeFile(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return std::generic_category().message(errno);
  const char* at = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, at, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return std::generic_category().message(error);
    }
    at += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) return std::generic_category().message(errno);
  return {};
}

TerminalReport failed(const std::string& reason) { return {DH_TASK_FAILED, reasonDetail(reason)}; }

}  // namespace

std::string resultBlockId(std::uint64_t task_id) {
  return "task_" + std::to_string(task_id) + "_result";
}

std::string TerminalReport::detailJson() const {
  return detail.dump(-1, ' ', false, json::error_handler_t::replace);
}

json reasonDetail(const std::string& reason) { return json{{"reason", reason}}; }

std::string reasonJson(const std::string& reason) {
  return reasonDetail(reason).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string makeOutputDir(const std::string& work_dir) {
  for (const auto& [dir, mode] :
       {std::pair{work_dir, 0700}, std::pair{work_dir + "/output", 0755}}) {
    if (::mkdir(dir.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST) {
      return "cannot create " + dir + ": " + std::generic_category().message(errno);
    }
  }
  return {};
}

TerminalReport resultReport(const TaskSpec& spec, const LibraryConfig& config,
                            const std::string& result, std::uint64_t duration_ms) {
  const std::uint64_t bytes = result.size();
  if (bytes > config.max_result_bytes) {
    return failed("result of " + std::to_string(bytes) + " bytes is above max_result_bytes (" +
                  std::to_string(config.max_result_bytes) + ")");
  }
  json detail = {{"bytes", bytes}, {"duration_ms", duration_ms}};
  if (bytes > config.max_direct_result_bytes) {
    const std::string dir = spec.work_dir + "/output";
    if (std::string why = makeOutputDir(spec.work_dir); !why.empty()) {
      return failed(why + " for the result");
    }
    const std::string id = resultBlockId(spec.task_id);
    if (std::string why = writeFile(dir + "/" + id, result); !why.empty()) {
      return failed("cannot write the result block " + id + " (" + std::to_string(bytes) +
                    " bytes): " + why);
    }
    detail["block"] = id;
  } else {
    protocol::putResultValue(detail, result);
  }
  return {DH_TASK_FINISHED, json{{"result", std::move(detail)}}};
}

}  // namespace dockhand::plugins::library
