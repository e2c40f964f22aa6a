// Result<T>: how a call across a part boundary returns an expected failure. Either the value
// or an Error saying what went wrong, for a person (message) and for the caller's next step
// (code, retryable). Result<void> carries no value: success or an Error.
//
// The one error style (docs/architecture.md, "Errors"): a failure the caller is meant to
// handle (a refused launch, a handshake the driver turned down, a frame that does not
// decode) is a Result; an exception is for a bug, for a start-up or config error caught in
// one place (ConfigError), and for the plugin ABI's catch-all. A Result is [[nodiscard]]: a
// caller that drops one drops a failure.
//
// Header-only, no dependency beyond the standard library: the agent, the driver, the
// protocol and the plugins' shared code all include it. A Result is a plain value: no
// threading or lifetime rules beyond those of T and E. Reading value() of a failed Result (or
// error() of a successful one) is a bug and throws std::bad_variant_access.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace dockhand {

// What went wrong. `message` is one line a person can act on; `code` a short name a caller
// may branch on (a protocol::error_code such as "auth_failed"; empty when the caller needs
// none); `retryable` says whether the same call may succeed later unchanged.
struct Error {
  Error() = default;
  explicit Error(std::string what, std::string kind = {}, bool may_retry = false)
      : message(std::move(what)), code(std::move(kind)), retryable(may_retry) {}

  std::string message;
  std::string code;
  bool retryable = false;
};

// A value of T, or an error of E (Error unless the boundary needs its own, e.g. the
// protocol's DecodeError). Built implicitly from either, so a function returns `value` or
// `Error{"why"}`.
template <typename T, typename E = Error>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<T, E>, "a Result's value and error types must differ");
  static_assert(!std::is_reference_v<T> && !std::is_reference_v<E>, "store values");

 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT implicit
  Result(E error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT implicit

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const E& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, E> state_;
};

// Success (default-constructed) or an error.
template <typename E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)), failed_(true) {}  // NOLINT implicit

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }

  const E& error() const {
    if (!failed_) throw std::bad_variant_access();
    return error_;
  }

 private:
  E error_{};
  bool failed_ = false;
};

}  // namespace dockhand
