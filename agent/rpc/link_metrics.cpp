#include "rpc/link_metrics.h"

#include <string>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

namespace proto = dockhand::protocol;

LinkMetrics::LinkMetrics(metrics::Registry& registry)
    : received_(
          byType(registry.counter("dockhand_driver_link_frames_received_total",
                                  "Frames received from the driver, by message type.", {"type"}))),
      sent_(byType(registry.counter("dockhand_driver_link_frames_sent_total",
                                    "Frames sent to the driver, by message type.", {"type"}))),
      decode_errors_(registry
                         .counter("dockhand_driver_link_frame_decode_errors_total",
                                  "Frames from the driver that could not be decoded (answered "
                                  "with an error).")
                         .get()),
      auth_failures_(registry
                         .counter("dockhand_auth_failures_total",
                                  "Requests and handshakes refused for authentication, by where.",
                                  {"where"})
                         .labels({"driver_link"})),
      reconnects_(registry
                      .counter("dockhand_driver_link_reconnects_total",
                               "Connections to the driver made after the first.")
                      .get()),
      connected_(registry
                     .gauge("dockhand_driver_link_connected",
                            "1 while the link to the driver is connected (handshake done), else 0.")
                     .get()) {}

LinkMetrics::ByType LinkMetrics::byType(metrics::Family<metrics::Counter>& family) {
  ByType out;
  for (const proto::MessageSpec& spec : proto::allMessages()) {
    const auto index = static_cast<std::size_t>(spec.type);
    if (out.size() <= index) out.resize(index + 1);
    out[index] = &family.labels({std::string(spec.name)});
  }
  out.push_back(&family.labels({std::string(proto::kReplyType)}));
  out.push_back(&family.labels({std::string(proto::kErrorType)}));
  out.push_back(&family.labels({"other"}));
  return out;
}

metrics::Counter& LinkMetrics::counterFor(const ByType& counters, std::string_view type) {
  const std::size_t messages = counters.size() - 3;
  if (type == proto::kReplyType) return *counters[messages];
  if (type == proto::kErrorType) return *counters[messages + 1];
  if (const proto::MessageSpec* spec = proto::findMessage(type)) {
    return *counters[static_cast<std::size_t>(spec->type)];
  }
  return *counters[messages + 2];
}

void LinkMetrics::connected() {
  if (ever_connected_) reconnects_.inc();
  ever_connected_ = true;
  connected_.set(1);
}

}  // namespace dockhand::agent
