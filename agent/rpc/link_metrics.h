// LinkMetrics: what the driver link counts (docs/operations.md#metrics): frames in and out by
// message type, frames that could not be decoded, connections and handshakes refused for
// authentication. Every counter is looked up when the link is built, so that counting a frame
// is a lookup of its type's spec (protocol::findMessage) and one relaxed atomic add.
#pragma once

#include <string_view>
#include <vector>

#include "dockhand/metrics/metrics.h"

namespace dockhand::agent {

class LinkMetrics {
 public:
  explicit LinkMetrics(metrics::Registry& registry);

  // A frame of wire type `type` ("LaunchTask", "Reply", "Error"; anything else counts as
  // "other").
  void received(std::string_view type) { counterFor(received_, type).inc(); }
  void sent(std::string_view type) { counterFor(sent_, type).inc(); }
  void decodeError() { decode_errors_.inc(); }
  void authFailure() { auth_failures_.inc(); }
  // A connection (Hello and authentication included) succeeded / ended.
  void connected();
  void disconnected() { connected_.set(0); }

 private:
  // Indexed by protocol::MessageType, then Reply, Error and other.
  using ByType = std::vector<metrics::Counter*>;
  static metrics::Counter& counterFor(const ByType& counters, std::string_view type);
  static ByType byType(metrics::Family<metrics::Counter>& family);

  ByType received_;
  ByType sent_;
  metrics::Counter& decode_errors_;
  metrics::Counter& auth_failures_;
  metrics::Counter& reconnects_;
  metrics::Gauge& connected_;
  bool ever_connected_ = false;  // the link's I/O thread
};

}  // namespace dockhand::agent
