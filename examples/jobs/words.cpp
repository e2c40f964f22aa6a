// The "words" job library: the word count and the two-stage shuffle of examples/wordcount and
// examples/decommission, as task functions that run inside the agent (docs/jobs.md).
//
//   count   args {"file": PATH, "pad_to": N}: the number of words of PATH (or, without "file",
//           of every input block), as text; "pad_to" left-pads it with spaces to N bytes, to
//           see a result too large for a status update travel as a block.
//   map     args {"file": PATH, "reducers": R, "shuffle": S, "map": M, "sleep_ms": T}: counts
//           the words of PATH and splits the counts by a hash of the word into R blocks
//           shuffle_<S>_<M>_<r> of "word count" lines (every block is written, maybe empty).
//           S defaults to 0, M to the task's partition; T (default 0) waits first, polling for
//           a kill, to give a decommission something to watch. "started_file": PATH (optional)
//           is created when the task starts, for a script that waits until the maps run.
//   reduce  no args: adds up the counts of every input block (the shuffle blocks of its
//           number); the result is the sum, as text.
//
// Threading: each call runs on its own thread; nothing here is shared between calls. A
// failure throws, and the exception's text becomes the task's FAILED reason.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <dockhand/job.hpp>
#include <nlohmann/json.hpp>

namespace {

using Json = nlohmann::json;
using dockhand::job::Task;

Json parseArgs(const Task& task) {
  Json args = Json::parse(task.args(), nullptr, /*allow_exceptions=*/false);
  if (args.is_discarded()) throw std::runtime_error("args are not JSON");
  if (!args.is_null() && !args.is_object()) throw std::runtime_error("args must be an object");
  return args.is_null() ? Json::object() : args;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path);
  return text.str();
}

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Calls `word` for every whitespace-separated word of `text`.
template <typename Fn>
void forEachWord(std::string_view text, Fn&& word) {
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && isSpace(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !isSpace(text[i])) ++i;
    if (i > start) word(text.substr(start, i - start));
  }
}

// FNV-1a: the same on every agent, whatever its standard library.
std::uint32_t hashWord(std::string_view word) {
  std::uint32_t h = 2166136261u;
  for (char c : word) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

std::int64_t intArg(const Json& args, const char* key, std::int64_t fallback) {
  auto it = args.find(key);
  if (it == args.end()) return fallback;
  if (!it->is_number_integer()) throw std::runtime_error(std::string(key) + " must be an integer");
  return it->get<std::int64_t>();
}

// Waits `ms`, returning early when the task is killed.
void pause(const Task& task, std::int64_t ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!task.cancelled() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

// The task functions: outside the anonymous namespace, so that they are in the library's
// dynamic symbol table and a thread dump of a stuck task names them (words::map, ...).
namespace words {

void count(Task& task) {
  const Json args = parseArgs(task);
  std::uint64_t total = 0;
  auto add = [&](std::string_view) { ++total; };
  if (args.contains("file")) {
    forEachWord(readFile(args.at("file").get<std::string>()), add);
  } else {
    for (const std::string& id : task.inputIds()) forEachWord(task.input(id), add);
  }
  std::string result = std::to_string(total);
  const std::int64_t pad_to = intArg(args, "pad_to", 0);
  if (pad_to > static_cast<std::int64_t>(result.size())) {
    result.insert(0, static_cast<std::size_t>(pad_to) - result.size(), ' ');
  }
  task.setResult(result);
}

void map(Task& task) {
  const Json args = parseArgs(task);
  const std::int64_t reducers = intArg(args, "reducers", 0);
  if (reducers < 1 || reducers > 10000) throw std::runtime_error("reducers must be 1..10000");
  const std::int64_t shuffle = intArg(args, "shuffle", 0);
  const std::int64_t map_id = intArg(args, "map", task.partition());
  if (args.contains("started_file")) {
    std::ofstream started(args.at("started_file").get<std::string>());
    if (!started) throw std::runtime_error("cannot create started_file");
  }
  pause(task, intArg(args, "sleep_ms", 0));
  if (task.cancelled()) return;

  std::map<std::string, std::uint64_t> counts;  // sorted: the blocks read the same every run
  forEachWord(readFile(args.at("file").get<std::string>()),
              [&](std::string_view word) { ++counts[std::string(word)]; });
  std::vector<std::string> parts(static_cast<std::size_t>(reducers));
  for (const auto& [word, n] : counts) {
    parts[hashWord(word) % parts.size()] += word + " " + std::to_string(n) + "\n";
  }
  for (std::size_t r = 0; r < parts.size(); ++r) {
    task.write("shuffle_" + std::to_string(shuffle) + "_" + std::to_string(map_id) + "_" +
                   std::to_string(r),
               parts[r]);
  }
}

void reduce(Task& task) {
  std::uint64_t total = 0;
  for (const std::string& id : task.inputIds()) {
    const std::string_view block = task.input(id);
    std::size_t line_start = 0;
    while (line_start < block.size()) {
      std::size_t end = block.find('\n', line_start);
      if (end == std::string_view::npos) end = block.size();
      const std::string_view line = block.substr(line_start, end - line_start);
      const std::size_t space = line.rfind(' ');
      if (space != std::string_view::npos) total += std::stoull(std::string(line.substr(space)));
      line_start = end + 1;
    }
  }
  task.setResult(std::to_string(total));
}

}  // namespace words

DOCKHAND_JOB_LIBRARY("words", "1.0.0", "Word count and a two-stage shuffle",
                     DOCKHAND_TASK_NAMED("count", words::count),
                     DOCKHAND_TASK_NAMED("map", words::map),
                     DOCKHAND_TASK_NAMED("reduce", words::reduce))
