#include "worker_channel.h"

#include <sys/socket.h>

#include <cerrno>
#include <stdexcept>

namespace dockhand::plugins::library {

std::string frameMessage(const nlohmann::json& message) {
  std::string body = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (body.size() > kMaxWorkerMessage) {
    throw std::length_error("worker message of " + std::to_string(body.size()) +
                            " bytes is over the channel's limit");
  }
  const auto size = static_cast<std::uint32_t>(body.size());
  std::string out;
  out.reserve(4 + body.size());
  for (int shift = 0; shift < 32; shift += 8) {
    out.push_back(static_cast<char>((size >> static_cast<unsigned>(shift)) & 0xffU));
  }
  out += body;
  return out;
}

bool writeAll(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::optional<nlohmann::json> MessageReader::next() {
  if (buffer_.size() - offset_ < 4) {
    if (offset_ > 0) {
      buffer_.erase(0, offset_);
      offset_ = 0;
    }
    return std::nullopt;
  }
  std::uint32_t size = 0;
  for (unsigned i = 0; i < 4; ++i) {
    size |= static_cast<std::uint32_t>(static_cast<unsigned char>(buffer_[offset_ + i])) << (8 * i);
  }
  if (size > kMaxWorkerMessage) {
    throw std::runtime_error("a message of " + std::to_string(size) +
                             " bytes, over the channel's limit");
  }
  if (buffer_.size() - offset_ - 4 < size) return std::nullopt;
  const char* begin = buffer_.data() + offset_ + 4;
  auto message = nlohmann::json::parse(begin, begin + size, nullptr, /*allow_exceptions=*/false);
  offset_ += 4 + size;
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  if (message.is_discarded() || !message.is_object() || !message.contains("t")) {
    throw std::runtime_error("a message that is not a JSON object with a type");
  }
  return message;
}

}  // namespace dockhand::plugins::library
