#include "worker_channel.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

void Outbox::append(const std::string& bytes, int pass) {
  if (pass >= 0) descriptors_.emplace_back(bytes_.size(), pass);
  bytes_ += bytes;
}

void Outbox::clear() {
  for (const auto& [offset, fd] : descriptors_) ::close(fd);
  descriptors_.clear();
  bytes_.clear();
}

int Outbox::flush(int socket) {
  while (!bytes_.empty()) {
    // Never past the next descriptor's byte: it goes with that byte, not later.
    const bool attach = !descriptors_.empty() && descriptors_.front().first == 0;
    std::size_t size = bytes_.size();
    if (!descriptors_.empty() && !attach) size = descriptors_.front().first;
    if (attach && descriptors_.size() > 1) size = descriptors_[1].first;
    ssize_t n = 0;
    if (attach) {
      iovec data{bytes_.data(), size};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr message{};
      message.msg_iov = &data;
      message.msg_iovlen = 1;
      message.msg_control = control;
      message.msg_controllen = sizeof control;
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(header), &descriptors_.front().second, sizeof(int));
      n = ::sendmsg(socket, &message, MSG_NOSIGNAL);
    } else {
      n = ::send(socket, bytes_.data(), size, MSG_NOSIGNAL);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EWOULDBLOCK ? EAGAIN : errno;
    }
    if (attach) {
      ::close(descriptors_.front().second);  // the worker has its own copy now
      descriptors_.pop_front();
    }
    const auto sent = static_cast<std::size_t>(n);
    bytes_.erase(0, sent);
    for (auto& entry : descriptors_) entry.first -= sent;
  }
  return 0;
}

ssize_t receiveWithDescriptors(int socket, char* buffer, std::size_t size,
                               std::deque<int>& received) {
  constexpr std::size_t kMaxDescriptors = 16;
  iovec data{buffer, size};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxDescriptors * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      received.push_back(fd);
    }
  }
  return n;
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
