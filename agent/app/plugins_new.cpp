#include "app/plugins_new.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/exit_codes.h"
#include "plugins/plugin_library.h"

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNewUsage =
    "usage: dockhand plugins new --kind discovery|runner|migration|job NAME [--dir DIR]\n"
    "                            [--templates DIR]\n";

// The C++ name the templates give their class (or namespace), replaced by templateClassName().
constexpr const char* kTemplateClass = "DockhandTemplateClass";

int newUsage(std::ostream& err, const std::string& problem) {
  err << "dockhand plugins new: " << problem << "\n" << kNewUsage;
  return toInt(ExitCode::kUsage);
}

// Template file (under the templates dir) -> where it goes in the new project.
std::vector<std::pair<fs::path, fs::path>> filesOf(const std::string& kind) {
  if (kind == "job") {
    return {{"job/CMakeLists.txt", "CMakeLists.txt"}, {"job/job.cpp", "src/job.cpp"}};
  }
  return {{"plugin/CMakeLists.txt", "CMakeLists.txt"},
          {"plugin/README.md", "README.md"},
          {fs::path(kind) / "plugin.cpp", "src/plugin.cpp"},
          {fs::path(kind) / "plugin_test.cpp", "test/plugin_test.cpp"}};
}

std::string replaceAll(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace

std::string templateClassName(const std::string& name) {
  std::string out;
  bool upper = true;
  for (const char c : name) {
    if (c == '-' || c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) != 0) out.insert(0, "P");
  return out;
}

int runPluginsNew(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string kind;
  std::string name;
  std::string dir;
  std::string templates = DOCKHAND_TEMPLATE_DIR;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--kind" || arg == "--dir" || arg == "--templates") {
      if (i + 1 >= args.size()) return newUsage(err, arg + " needs a value");
      (arg == "--kind" ? kind : arg == "--dir" ? dir : templates) = args[++i];
    } else if (!arg.empty() && arg[0] == '-') {
      return newUsage(err, "unknown option '" + arg + "'");
    } else if (name.empty()) {
      name = arg;
    } else {
      return newUsage(err, "one NAME only");
    }
  }
  if (kind != "discovery" && kind != "runner" && kind != "migration" && kind != "job") {
    return newUsage(err, kind.empty()
                             ? "--kind is required"
                             : "unknown kind '" + kind + "' (discovery, runner, migration or job)");
  }
  if (!isValidPluginName(name)) {
    return newUsage(err, name.empty() ? "a NAME is required"
                                      : "'" + name +
                                            "' is not a plugin name ([a-z0-9_-], 1 to 64 "
                                            "characters)");
  }
  const fs::path target = dir.empty() ? fs::path(name) : fs::path(dir);
  std::error_code ec;
  if (fs::exists(target, ec) && !fs::is_empty(target, ec)) {
    err << "dockhand plugins new: " << target.string() << " exists and is not empty\n";
    return toInt(ExitCode::kConfigError);
  }
  const std::string class_name = templateClassName(name);
  for (const auto& [from, to] : filesOf(kind)) {
    const fs::path source = fs::path(templates) / from;
    std::ifstream in(source, std::ios::binary);
    if (!in) {
      err << fmt::format(
          "dockhand plugins new: no template {} (the templates come with the dockhand-dev "
          "package; --templates DIR names another place)\n",
          source.string());
      return toInt(ExitCode::kConfigError);
    }
    const std::string text(std::istreambuf_iterator<char>(in), {});
    const fs::path file = target / to;
    fs::create_directories(file.parent_path(), ec);
    std::ofstream write(file, std::ios::binary | std::ios::trunc);
    write << replaceAll(replaceAll(text, "@NAME@", name), kTemplateClass, class_name);
    write.close();
    if (!write) {
      err << "dockhand plugins new: cannot write " << file.string() << "\n";
      return toInt(ExitCode::kConfigError);
    }
  }
  out << fmt::format(
      "wrote a {} {} in {}; build and test it:\n"
      "  cmake -S {} -B {}/build && cmake --build {}/build && ctest --test-dir "
      "{}/build --output-on-failure\n",
      kind == "job" ? "job library" : kind + " plugin", name, target.string(), target.string(),
      target.string(), target.string(), target.string());
  return toInt(ExitCode::kSuccess);
}

}  // namespace dockhand::agent
