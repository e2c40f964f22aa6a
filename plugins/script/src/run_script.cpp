#include "run_script.h"

#include <fstream>
#include <vector>

namespace dockhand::plugins::script {
namespace {

bool hasShebang(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[2] = {};
  in.read(head, 2);
  return in.gcount() == 2 && head[0] == '#' && head[1] == '!';
}

}  // namespace

BoundedRun runScript(const std::string& path, std::chrono::milliseconds timeout) {
  std::vector<std::string> args;
  if (hasShebang(path)) {
    args = {path};
  } else {
    args = {"/bin/sh", path};
  }
  return runBounded(args, timeout);
}

}  // namespace dockhand::plugins::script
