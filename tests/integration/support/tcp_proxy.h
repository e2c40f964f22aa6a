// TcpProxy: a TCP forwarder on 127.0.0.1 between a program under test and its peer, that a
// test can cut: every connection through it is closed at once, and for a while new ones are
// accepted and closed straight away (the port stays the proxy's), as a network cut or a
// switch flap looks to both ends. One thread polls every socket; the destructor stops it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dockhand::testing {

class TcpProxy {
 public:
  // Forwards 127.0.0.1:port() to target_port on 127.0.0.1.
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // Closes every connection now and refuses new ones (accept, then close) for `pause`.
  void cut(std::chrono::milliseconds pause);
  // Connections forwarded so far (refused ones not counted).
  std::size_t forwarded() const { return forwarded_.load(); }

 private:
  struct Pair {
    int client = -1;
    int server = -1;
  };
  void run();
  void closeAll();

  int target_port_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> forwarded_{0};
  std::mutex mutex_;  // guards cut_until_ and cut_now_
  std::chrono::steady_clock::time_point cut_until_{};
  bool cut_now_ = false;
  std::vector<Pair> pairs_;  // the poll thread's only
  std::thread thread_;
};

}  // namespace dockhand::testing
