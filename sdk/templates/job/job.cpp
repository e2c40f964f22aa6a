// The @NAME@ job library. One task function, `count`: the number of words in the task's input
// blocks, as its result. A task of a job file:
//
//   {"library": "/usr/local/lib/dockhand/jobs/lib@NAME@.so", "function": "count",
//    "inputs": ["rdd_0_0"]}
//
// Try it with no driver:  dockhand jobs run build/lib@NAME@.so count --input rdd_0_0=FILE
// Each call runs on a thread of its own: share nothing between calls without a lock.
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include <dockhand/job.hpp>

namespace {

std::uint64_t countWords(std::string_view text) {
  std::uint64_t words = 0;
  bool in_word = false;
  for (const char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

}  // namespace

// Outside the anonymous namespace: a thread dump of a stuck task then names it.
namespace DockhandTemplateClass {

void count(dockhand::job::Task& task) {
  std::uint64_t words = 0;
  for (const std::string& id : task.inputIds()) words += countWords(task.input(id));
  task.log(dockhand::job::Level::kInfo, "counted " + std::to_string(words) + " words");
  task.setResult(std::to_string(words));
}

}  // namespace DockhandTemplateClass

DOCKHAND_JOB_LIBRARY("@NAME@", "0.1.0", "Counts the words of its inputs",
                     DOCKHAND_TASK_NAMED("count", DockhandTemplateClass::count))
