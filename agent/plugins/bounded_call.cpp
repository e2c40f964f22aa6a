#include "plugins/bounded_call.h"

#include <atomic>

namespace dockhand::agent {
namespace {

std::atomic<std::int64_t> gStuckCalls{0};

}  // namespace

std::uint64_t stuckPluginCalls() {
  const auto n = gStuckCalls.load();
  return n > 0 ? static_cast<std::uint64_t>(n) : 0;
}

namespace detail {
void noteStuckCall(int delta) { gStuckCalls += delta; }
}  // namespace detail

}  // namespace dockhand::agent
