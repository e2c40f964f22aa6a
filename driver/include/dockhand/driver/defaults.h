// The defaults of the driver's settings that more than one part of it holds (DriverConfig, what
// `--config` may change, and AgentServer's ServerOptions), each written once. docs/driver.md
// documents them.
#pragma once

#include <cstddef>

namespace dockhand::driver::defaults {

// Tries of one job task before the job fails.
inline constexpr int kMaxAttempts = 4;
// launch_ahead's "auto", its default: tasks are sent ahead of free cores only while the job's
// tasks prove short (SchedulerOptions::launch_ahead says how). A number N >= 0 instead sends
// every agent N cores' worth ahead whatever its tasks take (0 is Spark's way: free cores only).
inline constexpr int kLaunchAheadAuto = -1;
// Threads serving HTTP requests (control API, upgrades) and wss:// agent connections (one
// each); plain ws:// agents take none (one reactor thread serves them all).
inline constexpr int kServerThreads = 4096;
// A connection that has not said Hello within this time is closed.
inline constexpr long kHelloTimeoutMs = 10000;
// An agent that sends nothing for this long is lost (also the connection's receive timeout).
inline constexpr long kAgentTimeoutMs = 60000;
// Frames queued for one agent beyond this count mean it stopped reading: it is dropped.
inline constexpr std::size_t kMaxQueuedFrames = 100000;
// The most peers one GetPeers reply offers (a different slice of the cluster to each asker):
// enough to spread a decommissioning agent's blocks, and a reply that does not grow with the
// cluster (9,000 peers to each of 1,000 decommissioning agents were 600 MB of JSON).
inline constexpr std::size_t kMaxPeersOffered = 64;

}  // namespace dockhand::driver::defaults
