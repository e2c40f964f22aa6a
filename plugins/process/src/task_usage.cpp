#include "task_usage.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "proc_tree.h"

namespace dockhand::plugins::process {

void TaskUsage::add(const rusage& usage) {
  auto micros = [](const timeval& t) {
    return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000U +
           static_cast<std::uint64_t>(t.tv_usec);
  };
  cpu_us += micros(usage.ru_utime) + micros(usage.ru_stime);
  const auto rss = static_cast<std::uint64_t>(usage.ru_maxrss > 0 ? usage.ru_maxrss : 0);
  if (rss > peak_rss_kib) peak_rss_kib = rss;
  measured = true;
}

nlohmann::json TaskUsage::toMetrics(std::uint64_t spawner_peak_kib,
                                    std::uint64_t sampled_peak_kib) const {
  nlohmann::json metrics = nlohmann::json::object();
  if (measured) metrics["cpu_time_ms"] = cpu_us / 1000U;
  if (measured && peak_rss_kib > spawner_peak_kib) {
    metrics["peak_rss_bytes"] = peak_rss_kib * 1024U;
  } else if (sampled_peak_kib > 0) {
    metrics["peak_rss_bytes"] = sampled_peak_kib * 1024U;
  }
  if (read_bytes) metrics["io_read_bytes"] = *read_bytes;
  if (write_bytes) metrics["io_write_bytes"] = *write_bytes;
  return metrics;
}

std::optional<ProcessIo> readProcessIo(pid_t pid) {
  // On each task's end: one read of a small file, parsed in place.
  const std::string path = "/proc/" + std::to_string(pid) + "/io";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char text[512];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  const auto read = numberAfter(text, "rchar:", 10);
  const auto written = numberAfter(text, "wchar:", 10);
  if (!read || !written) return std::nullopt;
  return ProcessIo{*read, *written};
}

std::uint64_t ownPeakRssKib() {
  rusage self{};
  if (::getrusage(RUSAGE_SELF, &self) != 0 || self.ru_maxrss < 0) return 0;
  return static_cast<std::uint64_t>(self.ru_maxrss);
}

std::uint64_t readPeakRssKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

}  // namespace dockhand::plugins::process
