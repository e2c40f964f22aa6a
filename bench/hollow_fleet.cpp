#include "hollow_fleet.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <ctime>
#include <deque>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dockhand/net/websocket_frames.h"
#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::bench {

namespace proto = dockhand::protocol;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kFinText = 0x81;  // FIN + text (RFC 6455 5.2)
constexpr int kFinClose = 0x88;
constexpr int kFinPong = 0x8A;
constexpr std::uint32_t kMask = 0x5a17c3e9;  // any mask will do: nobody reads these but the driver
constexpr std::uint64_t kBlockBytes = std::uint64_t{16} * 1024;
constexpr auto kRetryEvery = std::chrono::milliseconds(10);

std::uint64_t wallMs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

template <class M>
std::string encoded(const M& message, std::uint64_t id = 0) {
  return proto::encodeEnvelope(proto::makeMessage(message, id));
}

}  // namespace

struct HollowFleet::Agent {
  enum class Phase { kWaiting, kConnecting, kUpgrading, kHello, kRegistering, kUp, kGone };
  int number = 0;  // a<number>; the epoll key
  std::string id;
  int cores = 1;
  int fd = -1;
  Phase phase = Phase::kWaiting;
  Clock::time_point retry_at{};
  Clock::time_point next_beat{};
  std::string in;
  std::string out;
  std::uint64_t next_ask = 1;
  std::uint64_t hello_ask = 0;
  std::uint64_t register_ask = 0;
  std::uint64_t peers_ask = 0;
  bool leaving = false;    // closes once `out` is written (after RemoveExecutor)
  bool wants_out = false;  // EPOLLOUT is in its epoll interest
  std::vector<proto::BlockInfo> blocks;
  std::string blockUrl() const { return fmt::format("http://127.0.0.1:9/{}/", id); }
};

HollowFleet::HollowFleet(std::chrono::milliseconds heartbeat) : heartbeat_(heartbeat) {}

HollowFleet::~HollowFleet() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (auto& [n, a] : agents_) {
    if (a->fd >= 0) ::close(a->fd);
  }
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void HollowFleet::start(int count, int cores, int port) {
  port_ = port;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::runtime_error("epoll_create1 failed");
  for (int i = 1; i <= count; ++i) {
    auto a = std::make_unique<Agent>();
    a->number = i;
    a->id = fmt::format("a{}", i);
    a->cores = cores;
    by_id_[a->id] = a.get();
    {
      std::lock_guard lock(mutex_);
      gone_[a->id] = false;
    }
    agents_[i] = std::move(a);
  }
  thread_ = std::thread([this] { loop(); });
  clockid_t clock{};
  if (::pthread_getcpuclockid(thread_.native_handle(), &clock) == 0) cpu_clock_ = clock;
}

void HollowFleet::loop() {
  std::array<epoll_event, 512> events{};
  while (!stop_.load()) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 10);
    for (int i = 0; i < n; ++i) {
      Agent& a = *agents_.at(static_cast<int>(events[static_cast<std::size_t>(i)].data.u64));
      const std::uint32_t what = events[static_cast<std::size_t>(i)].events;
      if (a.phase == Agent::Phase::kConnecting) {
        int error = 0;
        socklen_t size = sizeof error;
        ::getsockopt(a.fd, SOL_SOCKET, SO_ERROR, &error, &size);
        if (error != 0 || (what & (EPOLLERR | EPOLLHUP)) != 0) {
          close(a, false);  // nothing listens yet: again shortly
          continue;
        }
        a.phase = Agent::Phase::kUpgrading;
        a.out += fmt::format(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nUpgrade: websocket\r\nConnection: "
            "Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: "
            "13\r\n\r\n",
            port_);
      }
      if ((what & EPOLLIN) != 0) onReadable(a);
      if (a.fd >= 0) flush(a);
    }
    const auto now = Clock::now();
    for (auto& [number, agent] : agents_) {
      Agent& a = *agent;
      if (a.phase == Agent::Phase::kWaiting && now >= a.retry_at) connect(a);
      if (a.phase == Agent::Phase::kUp && !a.leaving && now >= a.next_beat) {
        a.next_beat = now + heartbeat_;
        proto::Heartbeat beat;
        beat.executor_id = a.id;
        beat.sent_at_ms = wallMs();
        beat.metrics.blocks = a.blocks.size();
        beat.metrics.block_bytes = a.blocks.size() * kBlockBytes;
        send(a, encoded(beat));
        flush(a);
      }
    }
  }
}

void HollowFleet::connect(Agent& a) {
  a.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (a.fd < 0) {
    noteSurprise(fmt::format("socket() failed (errno {}): raise the open-file limit", errno));
    a.retry_at = Clock::now() + std::chrono::seconds(1);
    return;
  }
  const int one = 1;
  ::setsockopt(a.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port_));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  const int rc = ::connect(a.fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  if (rc < 0 && errno != EINPROGRESS) {
    ::close(a.fd);
    a.fd = -1;
    a.retry_at = Clock::now() + kRetryEvery;
    return;
  }
  a.phase = Agent::Phase::kConnecting;
  epoll_event event{};
  event.events = EPOLLIN | EPOLLOUT;
  event.data.u64 = static_cast<std::uint64_t>(a.number);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, a.fd, &event);
  a.wants_out = true;
}

void HollowFleet::onReadable(Agent& a) {
  std::array<char, 65536> buffer{};
  for (;;) {
    const ssize_t got = ::read(a.fd, buffer.data(), buffer.size());
    if (got > 0) {
      a.in.append(buffer.data(), static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) break;
    close(a, true);  // the driver closed it (StopExecutor, or it dropped us)
    return;
  }
  if (a.phase == Agent::Phase::kUpgrading) {
    const auto end = a.in.find("\r\n\r\n");
    if (end == std::string::npos) return;
    if (a.in.rfind("HTTP/1.1 101", 0) != 0) {
      noteSurprise(a.id + ": the upgrade was refused: " + a.in.substr(0, a.in.find('\r')));
      close(a, true);
      return;
    }
    a.in.erase(0, end + 4);
    a.phase = Agent::Phase::kHello;
    proto::Hello hello;
    hello.role = "agent";
    hello.software = "dockhand-fleet-bench (simulated agent)";
    a.hello_ask = a.next_ask++;
    send(a, encoded(hello, a.hello_ask));
  }
  // Server frames are not masked: 2 bytes, the extended length, the payload.
  std::size_t at = 0;
  while (a.fd >= 0 && a.in.size() - at >= 2) {
    const auto b0 = static_cast<unsigned char>(a.in[at]);
    const auto b1 = static_cast<unsigned char>(a.in[at + 1]);
    std::size_t header = 2;
    std::uint64_t length = b1 & 0x7fU;
    if (length >= 126) {
      const std::size_t extra = length == 126 ? 2 : 8;
      if (a.in.size() - at < 2 + extra) break;
      length = 0;
      for (std::size_t k = 0; k < extra; ++k) {
        length = (length << 8U) | static_cast<unsigned char>(a.in[at + 2 + k]);
      }
      header += extra;
    }
    if (a.in.size() - at < header + length) break;
    const std::string_view payload(a.in.data() + at + header, length);
    const unsigned opcode = b0 & 0x0fU;
    if (opcode == 0x1) {
      onFrame(a, payload);
    } else if (opcode == 0x8) {
      close(a, true);
      return;
    } else if (opcode == 0x9) {
      std::string pong;
      net::appendClientFrame(pong, kFinPong, payload, kMask);
      a.out += pong;
    }
    at += header + length;
  }
  a.in.erase(0, at);
}

void HollowFleet::send(Agent& a, const std::string& frame_text) {
  net::appendClientFrame(a.out, kFinText, frame_text, kMask);
}

void HollowFleet::onFrame(Agent& a, std::string_view text) {
  auto decoded = proto::decodeEnvelope(text);
  if (!decoded) {
    noteSurprise(a.id + ": a frame it cannot read: " + decoded.error().message);
    return;
  }
  const proto::Envelope& env = decoded.value();
  if (env.isError() || (env.isReply() && !env.ok)) {
    noteSurprise(fmt::format("{}: {} {}", a.id, env.error ? env.error->code : "",
                             env.error ? env.error->message : ""));
    return;
  }
  if (env.isReply()) {
    if (env.re == a.hello_ask) {
      proto::RegisterExecutor reg;
      reg.executor_id = a.id;
      reg.hostname = "127.0.0.1";
      reg.cores = a.cores;
      reg.block_url = a.blockUrl();
      a.register_ask = a.next_ask++;
      a.phase = Agent::Phase::kRegistering;
      send(a, encoded(reg, a.register_ask));
    } else if (env.re == a.register_ask) {
      send(a, encoded(proto::LaunchedExecutor{.executor_id = a.id}));
      a.phase = Agent::Phase::kUp;
      a.next_beat = Clock::now() + heartbeat_;
    } else if (env.re == a.peers_ask) {
      migrate(a, env.body.dump());
    }
    return;
  }
  if (env.type == "LaunchTask") {
    const auto launch = proto::decodeBody<proto::LaunchTask>(env.body);
    if (launch.task.payload.value("function", "") == "fill") {
      proto::BlockInfo block{.id = fmt::format("rdd_1_{}", launch.task.partition),
                             .size = kBlockBytes,
                             .checksum = "xxh64:0000000000000000",
                             .executor_id = a.id,
                             .url = {}};
      block.url = a.blockUrl() + block.id;
      a.blocks.push_back(block);
      send(a, encoded(proto::UpdateBlockInfo{
                  .executor_id = a.id, .added = {std::move(block)}, .removed = {}}));
    }
    proto::StatusUpdate done;
    done.executor_id = a.id;
    done.task_id = launch.task.task_id;
    done.state = proto::TaskState::kFinished;
    done.result = proto::Json{{"value", ""}};
    done.cpus = launch.task.cpus;
    send(a, encoded(done));
  } else if (env.type == "StopExecutor") {
    close(a, true);
  } else if (env.type == "DecommissionExecutor") {
    send(a, encoded(proto::ExecutorDecommissioning{.executor_id = a.id}, a.next_ask++));
    a.peers_ask = a.next_ask++;
    send(a, encoded(proto::GetPeers{.executor_id = a.id}, a.peers_ask));
  }
}

void HollowFleet::migrate(Agent& a, const std::string& peers_reply_body) {
  std::vector<Agent*> peers;
  for (const auto& peer : proto::parsePeers(proto::Json::parse(peers_reply_body))) {
    auto it = by_id_.find(peer.executor_id);
    if (it != by_id_.end() && it->second->phase == Agent::Phase::kUp && !it->second->leaving) {
      peers.push_back(it->second);
    }
  }
  if (peers.empty() && !a.blocks.empty()) {
    noteSurprise(a.id + ": no peer to take its blocks");
    return;
  }
  std::vector<std::string> removed;
  for (std::size_t i = 0; i < a.blocks.size(); ++i) {
    Agent& peer = *peers[i % peers.size()];
    proto::BlockInfo moved = a.blocks[i];
    moved.executor_id = peer.id;
    moved.url = peer.blockUrl() + moved.id;
    removed.push_back(moved.id);
    peer.blocks.push_back(moved);
    send(peer,
         encoded(proto::UpdateBlockInfo{.executor_id = peer.id, .added = {moved}, .removed = {}}));
    flush(peer);
  }
  a.blocks.clear();
  if (!removed.empty()) {
    send(a, encoded(proto::UpdateBlockInfo{
                .executor_id = a.id, .added = {}, .removed = std::move(removed)}));
  }
  send(a, encoded(proto::RemoveExecutor{.executor_id = a.id, .reason = "decommission finished"}));
  a.leaving = true;
}

void HollowFleet::flush(Agent& a) {
  while (!a.out.empty() && a.phase != Agent::Phase::kConnecting) {
    const ssize_t sent = ::send(a.fd, a.out.data(), a.out.size(), MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      close(a, true);
      return;
    }
    a.out.erase(0, static_cast<std::size_t>(sent));
  }
  if (a.out.empty() && a.leaving) {
    std::string bye;
    net::appendClientFrame(bye, kFinClose, {}, kMask);
    ::send(a.fd, bye.data(), bye.size(), MSG_NOSIGNAL);
    close(a, true);
    return;
  }
  // Changed only when the need to write changes: one system call per frame would be the
  // simulated fleet's own largest cost.
  if (a.wants_out == !a.out.empty()) return;
  a.wants_out = !a.out.empty();
  epoll_event event{};
  event.events = EPOLLIN | (a.wants_out ? static_cast<std::uint32_t>(EPOLLOUT) : 0U);
  event.data.u64 = static_cast<std::uint64_t>(a.number);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, a.fd, &event);
}

void HollowFleet::close(Agent& a, bool gone) {
  if (a.fd >= 0) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, a.fd, nullptr);
    ::close(a.fd);
    a.fd = -1;
  }
  a.in.clear();
  a.out.clear();
  if (!gone) {
    a.phase = Agent::Phase::kWaiting;
    a.retry_at = Clock::now() + kRetryEvery;
    return;
  }
  a.phase = Agent::Phase::kGone;
  std::lock_guard lock(mutex_);
  gone_[a.id] = true;
}

bool HollowFleet::waitGone(const std::string& id, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(mutex_);
      if (gone_.at(id)) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool HollowFleet::waitAllGone(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(mutex_);
      bool all = true;
      for (const auto& [id, gone] : gone_) all = all && gone;
      if (all) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

double HollowFleet::cpuSeconds() const {
  if (!cpu_clock_) return 0;
  timespec used{};
  ::clock_gettime(*cpu_clock_, &used);
  return static_cast<double>(used.tv_sec) + static_cast<double>(used.tv_nsec) / 1e9;
}

std::string HollowFleet::surprise() const {
  std::lock_guard lock(mutex_);
  return surprise_;
}

void HollowFleet::noteSurprise(const std::string& what) {
  std::lock_guard lock(mutex_);
  if (surprise_.empty()) surprise_ = what;
}

}  // namespace dockhand::bench
