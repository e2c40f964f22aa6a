#include "app/jobs_command.h"

#include <stdlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/exit_codes.h"
#include "dockhand/plugin.hpp"
#include "dockhand/protocol/result_value.h"
#include "job_library.h"
#include "library_config.h"
#include "task_context.h"
#include "task_end.h"

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;
namespace lib = dockhand::plugins::library;
using nlohmann::json;

constexpr const char* kJobsUsage =
    "usage: dockhand jobs inspect LIB [--json] [--allow-insecure]\n"
    "       dockhand jobs run LIB FUNCTION [--args JSON] [--input ID=FILE]... [--partition N]\n"
    "                        [--work-dir DIR] [--allow-insecure]\n";

int jobsUsage(std::ostream& err, const std::string& problem) {
  err << "dockhand jobs: " << problem << "\n" << kJobsUsage;
  return toInt(ExitCode::kUsage);
}

struct JobsOptions {
  std::vector<std::string> positional;
  bool json_output = false;
  bool allow_insecure = false;
  std::string args = "null";
  std::vector<std::pair<std::string, std::string>> inputs;  // id, file
  std::int64_t partition = 0;
  std::string work_dir;
};

// Parses the options after `inspect` or `run`; a usage problem, or nullopt.
std::optional<std::string> parseJobsOptions(const std::vector<std::string>& args, JobsOptions& o) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return args[++i];
    };
    if (arg == "--json") {
      o.json_output = true;
    } else if (arg == "--allow-insecure") {
      o.allow_insecure = true;
    } else if (arg == "--args" || arg == "--input" || arg == "--partition" || arg == "--work-dir") {
      auto given = value();
      if (!given) return arg + " needs a value";
      if (arg == "--args") {
        if (!json::accept(*given)) return "--args: not JSON: " + *given;
        o.args = json::parse(*given).dump();
      } else if (arg == "--input") {
        const auto eq = given->find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == given->size()) {
          return "--input: expected ID=FILE, got '" + *given + "'";
        }
        std::string id = given->substr(0, eq);
        if (!lib::isSafeFileName(id)) return "--input: '" + id + "' is not a block id";
        o.inputs.emplace_back(std::move(id), given->substr(eq + 1));
      } else if (arg == "--partition") {
        char* end = nullptr;
        errno = 0;
        o.partition = std::strtoll(given->c_str(), &end, 10);
        if (errno != 0 || end == given->c_str() || *end != '\0') {
          return "--partition: not an integer: " + *given;
        }
      } else {
        o.work_dir = *given;
      }
    } else if (!arg.empty() && arg[0] == '-') {
      return "unknown option '" + arg + "'";
    } else {
      o.positional.push_back(arg);
    }
  }
  return std::nullopt;
}

int inspectLibrary(const JobsOptions& o, std::ostream& out, std::ostream& err) {
  if (o.positional.size() != 1) return jobsUsage(err, "inspect takes one job library file");
  std::shared_ptr<lib::JobLibrary> library;
  try {
    library = lib::JobLibrary::open(fs::absolute(o.positional[0]).string(), o.allow_insecure, {});
  } catch (const lib::LibraryRefused& e) {
    err << "dockhand jobs: " << e.what() << "\n";
    return toInt(ExitCode::kConfigError);
  }
  json functions = json::array();
  for (const auto& [name, fn] : library->functions()) functions.push_back(name);
  if (o.json_output) {
    out << json{{"path", library->path()},
                {"name", library->name()},
                {"version", library->version()},
                {"job_abi", library->abi()},
                {"functions", functions}}
               .dump(2)
        << "\n";
    return 0;
  }
  out << fmt::format("{}\n  name:      {}\n  version:   {}\n  job ABI:   {}\n  functions: {}\n",
                     library->path(), library->name(), library->version(), library->abi(),
                     library->functionNames());
  return 0;
}

// A fresh directory under $TMPDIR for one task.
std::optional<std::string> makeJobDir(std::ostream& err) {
  const char* base = std::getenv("TMPDIR");
  std::string templ =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/dockhand-job-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    err << "dockhand jobs: cannot create a work dir from " << templ << ": " << std::strerror(errno)
        << "\n";
    return std::nullopt;
  }
  return templ;
}

int runFunction(const JobsOptions& o, std::ostream& out, std::ostream& err) {
  if (o.positional.size() != 2)
    return jobsUsage(err, "run takes a job library and a function name");
  const std::string path = fs::absolute(o.positional[0]).string();
  std::shared_ptr<lib::JobLibrary> library;
  try {
    library = lib::JobLibrary::open(path, o.allow_insecure, {});
  } catch (const lib::LibraryRefused& e) {
    err << "dockhand jobs: " << e.what() << "\n";
    return toInt(ExitCode::kConfigError);
  }
  const std::string& function_name = o.positional[1];
  const dh_task_fn function = library->find(function_name);
  if (function == nullptr) {
    err << fmt::format("dockhand jobs: job library '{}' ({}) has no function '{}' (it has: {})\n",
                       library->name(), path, function_name, library->functionNames());
    return toInt(ExitCode::kConfigError);
  }
  const bool keep_dir = !o.work_dir.empty();
  std::string work_dir = o.work_dir;
  if (work_dir.empty()) {
    auto made = makeJobDir(err);
    if (!made) return toInt(ExitCode::kConfigError);
    work_dir = *made;
  }
  work_dir = fs::absolute(work_dir).string();
  std::error_code ec;
  fs::create_directories(fs::path(work_dir) / "input", ec);
  if (ec) {
    err << "dockhand jobs: cannot create " << work_dir << "/input: " << ec.message() << "\n";
    return toInt(ExitCode::kConfigError);
  }
  lib::TaskSpec spec;
  spec.task_id = 1;
  spec.partition = o.partition;
  spec.work_dir = work_dir;
  spec.library = path;
  spec.function = function_name;
  spec.args = o.args;
  for (const auto& [id, file] : o.inputs) {
    fs::copy_file(file, fs::path(work_dir) / "input" / id, fs::copy_options::overwrite_existing,
                  ec);
    if (ec) {
      err << "dockhand jobs: --input " << id << "=" << file << ": " << ec.message() << "\n";
      return toInt(ExitCode::kConfigError);
    }
    spec.inputs.push_back(id);
  }

  lib::TaskContext context(spec, [&err](std::int32_t level, const std::string& line) {
    err << sdk::logLevelName(level) << " " << line << "\n";
  });
  const auto started = std::chrono::steady_clock::now();
  const lib::FunctionReturn returned = lib::callFunction(function, context);
  const auto duration_ms =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - started)
                                     .count());
  const lib::TerminalReport end = lib::endReport(spec, library->name(), lib::parseConfig("{}"),
                                                 context, returned, std::nullopt, duration_ms);
  const json& detail = end.detail;
  const fs::path output_dir = fs::path(work_dir) / "output";
  int code = 0;
  std::string result_block;
  if (end.state == DH_TASK_FINISHED) {
    const json& result = detail.at("result");
    if (result.contains("block")) {
      result_block = result["block"].get<std::string>();
      const fs::path file = output_dir / result_block;
      err << fmt::format("the value ({} bytes) is in {}\n", fs::file_size(file, ec), file.string());
      out << std::ifstream(file, std::ios::binary).rdbuf();
    } else if (auto bytes = protocol::resultBytes(result); bytes) {
      out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    }
    out.flush();
    err << fmt::format("task {} FINISHED in {} ms\n", function_name, duration_ms);
  } else {
    err << fmt::format("task {} FAILED: {}\n", function_name,
                       detail.value("reason", std::string("no reason given")));
    code = 1;
  }
  std::size_t outputs = 0;
  for (const auto& entry : fs::directory_iterator(output_dir, ec)) {
    if (entry.path().filename() == result_block) continue;
    ++outputs;
    err << fmt::format("output {}: {} bytes, {}\n", entry.path().filename().string(),
                       entry.file_size(ec), entry.path().string());
  }
  if (keep_dir || outputs > 0 || !result_block.empty()) {
    err << "work dir kept: " << work_dir << "\n";
  } else {
    fs::remove_all(work_dir, ec);
  }
  return code;
}

}  // namespace

int runJobsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << kJobsUsage;
    return args.empty() ? toInt(ExitCode::kUsage) : 0;
  }
  JobsOptions options;
  if (auto problem = parseJobsOptions(args, options)) return jobsUsage(err, *problem);
  if (args[0] == "inspect") return inspectLibrary(options, out, err);
  if (args[0] == "run") return runFunction(options, out, err);
  return jobsUsage(err, "unknown subcommand '" + args[0] + "'");
}

}  // namespace dockhand::agent
