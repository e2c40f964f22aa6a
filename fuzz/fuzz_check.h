// The invariant check of the fuzz targets: on failure, print what broke and abort, so that
// libFuzzer records the input as a crash. Unlike assert, it stays on in every build type.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define DOCKHAND_FUZZ_CHECK(condition, what)                                                      \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n  %s\n", __FILE__, __LINE__, #condition, \
                   std::string(what).c_str());                                                    \
      std::abort();                                                                               \
    }                                                                                             \
  } while (false)
