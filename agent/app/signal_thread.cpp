#include "app/signal_thread.h"

#include <pthread.h>
#include <signal.h>

#include <cstring>
#include <utility>

#include "dockhand/base/thread_name.h"
#include "dockhand/plugin.h"

namespace dockhand::agent {
namespace {

int wakeSignal() { return SIGRTMIN + DH_SIGRT_HOST_WAKE; }

sigset_t handledSignals(int decommission_signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, wakeSignal());
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGUSR2);
  if (decommission_signal > 0) sigaddset(&set, decommission_signal);
  return set;
}

}  // namespace

SignalThread::SignalThread(int decommission_signal, SignalHandlers handlers)
    : decommission_signal_(decommission_signal), handlers_(std::move(handlers)) {
  thread_ = std::thread([this] {
    nameThisThread("dh-signals");
    run();
  });
}

SignalThread::~SignalThread() {
  stop_ = true;
  ::pthread_kill(thread_.native_handle(), wakeSignal());
  thread_.join();
}

void SignalThread::run() {
  const sigset_t set = handledSignals(decommission_signal_);
  while (!stop_) {
    const int sig = sigwaitinfo(&set, nullptr);
    if (sig <= 0 || sig == wakeSignal()) continue;
    if (sig == decommission_signal_) {
      handlers_.decommission();
    } else if (sig == SIGUSR2) {
      handlers_.restart();
    } else if (sig == SIGHUP) {
      handlers_.reload();
    } else {
      handlers_.stop(std::string("received ") + sigabbrev_np(sig));
    }
  }
}

void blockAgentSignals(int decommission_signal) {
  sigset_t signals = handledSignals(decommission_signal);
  sigaddset(&signals, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

}  // namespace dockhand::agent
