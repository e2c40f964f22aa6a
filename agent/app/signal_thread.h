// SignalThread: the agent's process signals, taken on a thread of their own and handed to the
// agent as calls. The signals (plugin.h, SIGNALS, says which are whose):
//   SIGTERM, SIGINT        stop      ("received TERM")
//   SIGHUP                 reload
//   SIGUSR2                restart in place
//   the decommission signal (SIGPWR by default; 0: none)    decommission
//   SIGRTMIN + DH_SIGRT_HOST_WAKE   wakes the thread when it ends
// blockAgentSignals() must have blocked them in every thread before any other thread starts,
// so that only this one takes them (sigwaitinfo, no timeout: it sleeps until one comes).
//
// Threads: the handlers run on the signal thread; they post to the core thread and return.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace dockhand::agent {

struct SignalHandlers {
  std::function<void(const std::string& reason)> stop;
  std::function<void()> reload;
  std::function<void()> restart;
  std::function<void()> decommission;
};

class SignalThread {
 public:
  // Every handler must be set.
  SignalThread(int decommission_signal, SignalHandlers handlers);
  // Wakes the thread and joins it.
  ~SignalThread();
  SignalThread(const SignalThread&) = delete;
  SignalThread& operator=(const SignalThread&) = delete;

 private:
  void run();

  int decommission_signal_;
  SignalHandlers handlers_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Blocks the signals a SignalThread takes, and SIGPIPE (a peer that goes away mid-transfer is
// an error, not a death), in the calling thread and so in every thread it creates from then on.
// Call before any thread starts.
void blockAgentSignals(int decommission_signal);

}  // namespace dockhand::agent
