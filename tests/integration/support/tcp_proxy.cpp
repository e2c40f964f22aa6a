#include "support/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dockhand::testing {

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// Moves what `from` has to `to`; false when either end is done.
bool pump(int from, int to) {
  std::array<char, 65536> buffer{};
  const ssize_t n = ::recv(from, buffer.data(), buffer.size(), MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  ssize_t sent = 0;
  while (sent < n) {
    const ssize_t m =
        ::send(to, buffer.data() + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
    if (m < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd wait{to, POLLOUT, 0};
        ::poll(&wait, 1, 1000);
        continue;
      }
      return false;
    }
    sent += m;
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(int target_port) : target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = loopback(0);
  socklen_t length = sizeof address;
  if (listen_fd_ < 0 ||
      ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error(std::string("TcpProxy: cannot listen: ") + std::strerror(errno));
  }
  port_ = ntohs(address.sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] auto ignored = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
  closeAll();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void TcpProxy::cut(std::chrono::milliseconds pause) {
  {
    std::lock_guard lock(mutex_);
    cut_until_ = std::chrono::steady_clock::now() + pause;
    cut_now_ = true;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto ignored = ::write(wake_fd_, &one, sizeof one);
}

void TcpProxy::closeAll() {
  for (const Pair& pair : pairs_) {
    ::close(pair.client);
    ::close(pair.server);
  }
  pairs_.clear();
}

void TcpProxy::run() {
  while (!stopping_) {
    std::vector<pollfd> fds = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Pair& pair : pairs_) {
      fds.push_back({pair.client, POLLIN, 0});
      fds.push_back({pair.server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) return;
    bool refusing = false;
    {
      std::lock_guard lock(mutex_);
      if (cut_now_) {
        cut_now_ = false;
        closeAll();
        continue;
      }
      refusing = std::chrono::steady_clock::now() < cut_until_;
    }
    if ((fds[0].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] auto ignored = ::read(wake_fd_, &count, sizeof count);
    }
    if ((fds[1].revents & POLLIN) != 0) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0 && refusing) {
        ::close(client);
      } else if (client >= 0) {
        const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const sockaddr_in target = loopback(target_port_);
        if (server >= 0 &&
            ::connect(server, reinterpret_cast<const sockaddr*>(&target), sizeof target) == 0) {
          const int on = 1;
          ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
          ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
          pairs_.push_back({client, server});
          ++forwarded_;
        } else {
          ::close(client);
          if (server >= 0) ::close(server);
        }
      }
    }
    // Pairs are checked in the order polled; one whose end closed is dropped whole.
    std::vector<Pair> kept;
    for (std::size_t i = 0; i < pairs_.size() && 2 + 2 * i + 1 < fds.size(); ++i) {
      const Pair pair = pairs_[i];
      bool alive = true;
      const short client_events = fds[2 + 2 * i].revents;
      const short server_events = fds[2 + 2 * i + 1].revents;
      if (client_events != 0) alive = pump(pair.client, pair.server);
      if (alive && server_events != 0) alive = pump(pair.server, pair.client);
      if (alive) {
        kept.push_back(pair);
      } else {
        ::close(pair.client);
        ::close(pair.server);
      }
    }
    // A pair accepted in this round was not polled yet: keep it.
    for (std::size_t i = (fds.size() - 2) / 2; i < pairs_.size(); ++i) kept.push_back(pairs_[i]);
    pairs_ = std::move(kept);
  }
}

}  // namespace dockhand::testing
