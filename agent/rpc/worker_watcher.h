// WorkerWatcher: fate-sharing with the worker that launched this agent (the seed's
// --worker-url). It holds a TCP connection to the worker and reports the worker lost when
// that connection ends or cannot be made.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace dockhand::agent {

struct HostPort {
  std::string host;
  int port = 0;
};

// Parses "tcp://host:port", "spark://Worker@host:port", "ws://host:port/..." or "host:port".
// Throws std::invalid_argument with a message naming the URL when it has no host:port.
HostPort parseWorkerUrl(const std::string& url);

class WorkerWatcher {
 public:
  // `lost` runs on the watcher's thread (post it to the core thread).
  WorkerWatcher(std::string url, std::function<void(const std::string& reason)> lost);
  ~WorkerWatcher();
  WorkerWatcher(const WorkerWatcher&) = delete;
  WorkerWatcher& operator=(const WorkerWatcher&) = delete;

  void start();

 private:
  void run();

  std::string url_;
  std::function<void(const std::string&)> lost_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dockhand::agent
