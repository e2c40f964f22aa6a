// nameThisThread(): gives the calling thread a name that `top -H`, `ps -L`, gdb, perf and
// /proc/<pid>/task/<tid>/comm show ("dh-core", "dh-link", ...), so that an operator (or a
// profile) can tell the agent's and the driver's threads apart.
//
// Header-only, like result.h: plugins' shared code names its threads too. Linux keeps 15 bytes
// of a name; a longer one is cut there. Naming never fails a caller: an error is ignored.
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace dockhand {

inline void nameThisThread(std::string_view name) {
  constexpr std::size_t kMaxName = 15;  // TASK_COMM_LEN less the terminating zero
  const std::string cut(name.substr(0, kMaxName));
  ::pthread_setname_np(::pthread_self(), cut.c_str());
}

}  // namespace dockhand
