// A job library with one task function, `count`: the number of words of a file, or of the
// task's input blocks, as its result. A task of a job file:
//
//   {"library": "/usr/local/lib/dockhand/jobs/libword-job.so", "function": "count",
//    "args": "/path/to/file.txt"}
//
// "args" is a JSON string (the file) or absent (the input blocks). Only the standard library
// is used: a real library would parse its args with a JSON library.
//
// Threading: each call runs on a thread of its own and shares nothing with the others.
#include <dockhand/job.hpp>

#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

std::uint64_t countWords(std::string_view text) {
  std::uint64_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

// The text of a JSON string without escapes other than \" \\ \/ (enough for a path).
std::string jsonString(std::string_view json) {
  while (!json.empty() && std::isspace(static_cast<unsigned char>(json.back()))) {
    json.remove_suffix(1);
  }
  if (json.size() < 2 || json.front() != '"' || json.back() != '"') {
    throw std::runtime_error("args must be a JSON string (a file path) or absent");
  }
  std::string out;
  for (std::size_t i = 1; i + 1 < json.size(); ++i) {
    if (json[i] == '\\') {
      ++i;
      if (i + 1 >= json.size() || (json[i] != '"' && json[i] != '\\' && json[i] != '/')) {
        throw std::runtime_error("args: unsupported escape in the path");
      }
    }
    out += json[i];
  }
  return out;
}

}  // namespace

// Outside the anonymous namespace: the function stays in the dynamic symbol table, so a thread
// dump of a stuck task names it.
namespace word_job {

void count(dockhand::job::Task& task) {
  std::uint64_t words = 0;
  if (task.args() == "null") {
    for (const std::string& id : task.inputIds()) words += countWords(task.input(id));
  } else {
    const std::string path = jsonString(task.args());
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::ostringstream text;
    text << in.rdbuf();
    words = countWords(text.str());
  }
  task.setResult(std::to_string(words));
}

}  // namespace word_job

DOCKHAND_JOB_LIBRARY("word-job", "1.0.0", "Counts words",
                     DOCKHAND_TASK_NAMED("count", word_job::count))
