#include "rpc/worker_watcher.h"

#include <stdexcept>

#include <Poco/Net/NetException.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>

#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"

namespace dockhand::agent {

HostPort parseWorkerUrl(const std::string& url) {
  std::string rest = url;
  if (auto scheme = rest.find("://"); scheme != std::string::npos) rest = rest.substr(scheme + 3);
  if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  if (auto slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= rest.size()) {
    throw std::invalid_argument("worker URL '" + url + "' has no host:port");
  }
  HostPort out;
  out.host = rest.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  try {
    std::size_t used = 0;
    out.port = std::stoi(rest.substr(colon + 1), &used);
    if (used != rest.size() - colon - 1 || out.port <= 0 || out.port > 65535) throw 0;
  } catch (...) {
    throw std::invalid_argument("worker URL '" + url + "' has an invalid port");
  }
  return out;
}

WorkerWatcher::WorkerWatcher(std::string url, std::function<void(const std::string&)> lost)
    : url_(std::move(url)), lost_(std::move(lost)) {}

WorkerWatcher::~WorkerWatcher() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void WorkerWatcher::start() {
  thread_ = std::thread([this] {
    nameThisThread("dh-watcher");
    run();
  });
}

void WorkerWatcher::run() {
  auto log = logger("worker");
  std::string reason;
  try {
    HostPort target = parseWorkerUrl(url_);
    Poco::Net::StreamSocket socket;
    socket.connect(Poco::Net::SocketAddress(target.host, static_cast<Poco::UInt16>(target.port)),
                   Poco::Timespan(5, 0));
    log->info("watching worker {}", url_);
    char buffer[256];
    while (!stopping_) {
      if (!socket.poll(Poco::Timespan(0, 200L * 1000), Poco::Net::Socket::SELECT_READ)) continue;
      int n = socket.receiveBytes(buffer, sizeof buffer);
      if (n <= 0) {
        reason = "worker " + url_ + " closed the connection";
        break;
      }
    }
  } catch (const Poco::Exception& e) {
    reason = "worker " + url_ + ": " + e.displayText();
  } catch (const std::exception& e) {
    reason = e.what();
  }
  if (!stopping_ && !reason.empty()) lost_(reason);
}

}  // namespace dockhand::agent
