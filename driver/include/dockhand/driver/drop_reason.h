// Why the driver's transport (AgentServer) dropped an agent's connection on its own: told to
// the FrameHandler (onDropped) and counted as dockhand_driver_connections_dropped_total.
#pragma once

#include <string_view>

namespace dockhand::driver {

enum class DropReason {
  kFrameTooLarge,   // a frame or a fragmented message over max_frame_bytes
  kStoppedReading,  // its queue passed max_queued_frames, or nothing written moved for 30 s
  kNoHello,         // no Hello within hello_timeout_ms
  kBadWebSocket,    // a frame header no peer may send
};

// The metric label: "frame_too_large", "stopped_reading", "no_hello", "bad_websocket".
std::string_view toString(DropReason reason);

}  // namespace dockhand::driver
