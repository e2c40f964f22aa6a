#include "app/systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace dockhand::agent {

bool notifySystemd(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return false;
  // An absolute path, or '@' for a socket in the abstract namespace (first byte NUL).
  std::size_t length = std::strlen(path);
  if ((path[0] != '/' && path[0] != '@') || length >= sizeof(sockaddr_un::sun_path)) return false;

  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path, length);
  if (path[0] == '@') address.sun_path[0] = '\0';
  auto address_size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);

  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                          reinterpret_cast<const sockaddr*>(&address), address_size);
  ::close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

}  // namespace dockhand::agent
