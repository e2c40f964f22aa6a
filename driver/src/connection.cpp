// Connection: one agent connection's outbound queue and close. The ConnectionReactor that
// serves the connection takes the queue (ConnectionReactor::flush) and writes it; see
// agent_server.h.
#include <string>

#include <Poco/Net/WebSocket.h>
#include <fmt/format.h>

#include "dockhand/base/logging.h"
#include "dockhand/driver/agent_server.h"
#include "dockhand/protocol/task_frames.h"

#include "connection_reactor.h"

namespace dockhand::driver {

Connection::Connection(std::uint64_t id, std::string peer, std::size_t max_queued)
    : id_(id), peer_(std::move(peer)), max_queued_(max_queued) {}

bool Connection::send(Outbound frame) {
  bool accepted = false;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    if (closing_.load()) return false;
    if (queue_.size() >= max_queued_) {
      close_reason_ =
          fmt::format("more than {} frames queued: the agent stopped reading", max_queued_);
      closing_.store(true);
      overflowed_ = true;
      logger("driver")->warn("connection {} ({}): {}; dropping it", id_, peer_, close_reason_);
      wake = true;
    } else {
      queue_.push_back(std::move(frame));
      accepted = true;
      wake = !wake_pending_;  // once per batch: the reactor takes the whole queue
      wake_pending_ = true;
    }
  }
  if (wake && reactor_ != nullptr) reactor_->wake(id_);
  return accepted;
}

void Connection::close(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (closing_.load()) return;
    close_reason_ = reason;
    closing_.store(true);
  }
  if (reactor_ != nullptr) reactor_->wake(id_);
}

int Connection::encode(Outbound& item, std::string& text) {
  if (auto* s = std::get_if<std::string>(&item)) {
    text = std::move(*s);
  } else if (auto* e = std::get_if<protocol::Envelope>(&item)) {
    text = protocol::encodeEnvelope(*e);
  } else if (auto* l = std::get_if<protocol::LaunchTask>(&item)) {
    text = protocol::encodeLaunchTask(*l);  // written straight to text: every task sends one
  } else {
    auto& c = std::get<Control>(item);
    text = std::move(c.payload);
    return c.flags;
  }
  return Poco::Net::WebSocket::FRAME_TEXT;
}

}  // namespace dockhand::driver
