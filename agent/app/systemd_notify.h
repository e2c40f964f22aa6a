// notifySystemd: the service manager's readiness protocol (sd_notify), without libsystemd.
//
// Under a unit with Type=notify, systemd passes the path of a datagram socket in
// $NOTIFY_SOCKET; the service writes newline-separated assignments to it: READY=1 once it is
// up, STOPPING=1 when it begins to stop, STATUS=... for `systemctl status`. Outside systemd
// (no $NOTIFY_SOCKET) every call does nothing.
#pragma once

#include <string_view>

namespace dockhand::agent {

// Sends `state` (e.g. "READY=1\nSTATUS=registered") to $NOTIFY_SOCKET. Returns true when it was
// sent, false when there is no socket to send to or the send failed (never throws: a service
// manager that does not listen must not stop the agent).
bool notifySystemd(std::string_view state);

}  // namespace dockhand::agent
