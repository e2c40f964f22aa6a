// The one command-line reading of the bench programs (dockhand-bench, dockhand-fleet-bench,
// dockhand-migration-bench, dockhand-restart-bench): each names its options and where their
// values go, and gets the same rules: `--name value` pairs and value-less flags, -h/--help
// printing the usage, and an unknown option, a missing value or a value that is not a count
// answered with one line saying which, the usage, and exit code 64 (EX_USAGE).
//
//   BenchOptions parser("usage: dockhand-migration-bench [--blocks N] ...");
//   parser.count("--blocks", o.blocks).path("--dir", base);
//   if (auto exit_code = parser.parse(argc, argv)) return *exit_code;
//
// Header-only: each bench is one program and the parser is small.
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dockhand::bench {

class BenchOptions {
 public:
  // What a value's reader throws when the value will not do; the text is the reason.
  class BadValue : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
  };

  explicit BenchOptions(std::string usage) : usage_(std::move(usage)) {
    if (usage_.empty() || usage_.back() != '\n') usage_ += '\n';
  }

  // A flag without a value.
  BenchOptions& flag(const std::string& name, bool& target) {
    flags_[name] = [&target] { target = true; };
    return *this;
  }

  // An option whose value `read` takes (throwing BadValue when it will not do).
  BenchOptions& option(const std::string& name, std::function<void(const std::string&)> read) {
    options_[name] = std::move(read);
    return *this;
  }

  // A whole number of at least `least`.
  BenchOptions& count(const std::string& name, int& target, int least = 1) {
    return option(
        name, [&target, least](const std::string& value) { target = parseCount(value, least); });
  }
  BenchOptions& count(const std::string& name, std::optional<int>& target, int least = 1) {
    return option(
        name, [&target, least](const std::string& value) { target = parseCount(value, least); });
  }

  // Whole numbers of at least `least`, separated by commas ("0,100,1000").
  BenchOptions& counts(const std::string& name, std::vector<int>& target, int least = 0) {
    return option(name, [&target, least](const std::string& value) {
      target.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) {
        target.push_back(parseCount(item, least));
      }
      if (target.empty()) throw BadValue("a list of numbers is needed");
    });
  }

  BenchOptions& path(const std::string& name, std::filesystem::path& target) {
    return option(name, [&target](const std::string& value) {
      if (value.empty()) throw BadValue("an empty path");
      target = value;
    });
  }

  // Reads argv[1..]. Nothing when the program should go on; otherwise the code to exit with:
  // 0 after printing the usage for -h/--help, 64 after an error (on stderr, with the usage).
  std::optional<int> parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      const std::string name = argv[i];
      if (name == "-h" || name == "--help") {
        std::printf("%s", usage_.c_str());
        return 0;
      }
      if (auto flag = flags_.find(name); flag != flags_.end()) {
        flag->second();
        continue;
      }
      auto option = options_.find(name);
      if (option == options_.end()) return refuse("unknown option '" + name + "'");
      if (i + 1 >= argc) return refuse(name + " needs a value");
      const std::string value = argv[++i];
      try {
        option->second(value);
      } catch (const BadValue& e) {
        std::string why = name;
        why.append(" ").append(value).append(": ").append(e.what());
        return refuse(why);
      }
    }
    return std::nullopt;
  }

  // For a check across options after parse(): the same answer as a bad option.
  int refuse(const std::string& why) const {
    std::fprintf(stderr, "%s\n%s", why.c_str(), usage_.c_str());
    return 64;
  }

  static int parseCount(const std::string& value, int least) {
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size()) throw BadValue("not a whole number");
    if (n < least) throw BadValue("must be at least " + std::to_string(least));
    return n;
  }

 private:
  std::string usage_;
  std::map<std::string, std::function<void()>> flags_;
  std::map<std::string, std::function<void(const std::string&)>> options_;
};

// Where the programs a bench runs are: this program's own folder when `program` is there
// (an installed or copied bench), else `fallback` (the build tree's bin/).
inline std::filesystem::path binDirWith(const std::string& program,
                                        const std::filesystem::path& fallback) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self.parent_path() / program, ec)) return self.parent_path();
  return fallback;
}

}  // namespace dockhand::bench
