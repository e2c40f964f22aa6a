#include "task_usage.h"

#include <cstdlib>
#include <fstream>
#include <string>

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

nlohmann::json TaskUsage::toMetrics(std::uint64_t spawner_peak_kib) const {
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
  std::ifstream in("/proc/" + std::to_string(pid) + "/io");
  if (!in) return std::nullopt;
  ProcessIo io;
  bool read = false;
  bool written = false;
  std::string key;
  std::uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "rchar:") {
      io.read_bytes = value;
      read = true;
    } else if (key == "wchar:") {
      io.write_bytes = value;
      written = true;
    }
  }
  if (!read || !written) return std::nullopt;
  return io;
}

std::uint64_t readPeakRssKib(pid_t pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : "/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

}  // namespace dockhand::plugins::process
