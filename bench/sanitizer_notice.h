// A benchmark built with a sanitizer measures the sanitizer: say so before any figure.
#pragma once

#include <cstdio>

namespace dockhand::bench {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

inline void noticeSanitizer() {
  if (kSanitized) {
    std::fprintf(stderr,
                 "note: built with a sanitizer (the dev preset): figures are several times too "
                 "slow; use scripts/bench (the release preset)\n");
  }
}

}  // namespace dockhand::bench
