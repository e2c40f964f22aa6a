#include "dockhand/base/log_format.h"

#include <time.h>

#include <cctype>
#include <chrono>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>

namespace dockhand {
namespace {

thread_local LogContext gCurrentContext;

constexpr std::string_view kPluginLoggerPrefix = "plugin.";

template <typename Buffer>
void put(Buffer& out, std::string_view text) {
  out.append(text.data(), text.data() + text.size());
}

template <typename Buffer>
void put(Buffer& out, char c) {
  out.push_back(c);
}

// The length of the valid UTF-8 sequence at the start of `s`, or 0 when it is not one
// (an overlong form, a surrogate, beyond U+10FFFF, a stray or missing continuation byte).
std::size_t utf8Length(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](std::size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < s.size() && byte(i) >= lo && byte(i) <= hi;
  };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (b0 == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (b0 == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xF1 && b0 <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

template <typename Buffer>
void appendEscaped(std::string_view text, Buffer& out) {
  constexpr char kHex[] = "0123456789abcdef";
  put(out, '"');
  // Whether the byte goes out as it is: printable ASCII other than the quote and the backslash.
  const auto plain = [](unsigned char c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; };
  std::size_t i = 0;
  while (i < text.size()) {
    // A run of plain bytes at once (most of any text), not byte by byte.
    std::size_t run = i;
    while (run < text.size() && plain(static_cast<unsigned char>(text[run]))) ++run;
    if (run > i) {
      put(out, text.substr(i, run - i));
      i = run;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8Length(text.substr(i));
      if (n == 0) {
        put(out, "\xEF\xBF\xBD");  // U+FFFD for the one byte that starts no valid sequence
        ++i;
      } else {
        put(out, text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        put(out, "\\\"");
        break;
      case '\\':
        put(out, "\\\\");
        break;
      case '\n':
        put(out, "\\n");
        break;
      case '\r':
        put(out, "\\r");
        break;
      case '\t':
        put(out, "\\t");
        break;
      case '\b':
        put(out, "\\b");
        break;
      case '\f':
        put(out, "\\f");
        break;
      default:  // a control byte or DEL: the plain ones went out in their run above
        put(out, "\\u00");
        put(out, kHex[c >> 4]);
        put(out, kHex[c & 0xF]);
    }
    ++i;
  }
  put(out, '"');
}

void appendContextText(const LogContext& context, spdlog::memory_buf_t& dest) {
  if (context.has_task) fmt::format_to(std::back_inserter(dest), " task_id={}", context.task_id);
  if (!context.executor_id.empty()) {
    put(dest, " executor_id=");
    put(dest, context.executor_id);
  }
}

// %& of the text pattern.
class ContextFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& /*msg*/, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    appendContextText(gCurrentContext, dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ContextFlag>();
  }
};

class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string default_executor_id)
      : default_executor_id_(std::move(default_executor_id)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const LogContext& context = gCurrentContext;
    put(dest, R"({"timestamp":")");
    appendTimestamp(msg.time, dest);
    put(dest, R"(","level":")");
    const auto level = spdlog::level::to_string_view(msg.level);
    put(dest, std::string_view(level.data(), level.size()));
    put(dest, R"(","logger":)");
    const std::string_view name(msg.logger_name.data(), msg.logger_name.size());
    appendEscaped(name, dest);
    put(dest, R"(,"message":)");
    appendEscaped(std::string_view(msg.payload.data(), msg.payload.size()), dest);
    const std::string_view executor =
        context.executor_id.empty() ? std::string_view(default_executor_id_) : context.executor_id;
    if (!executor.empty()) {
      put(dest, R"(,"executor_id":)");
      appendEscaped(executor, dest);
    }
    if (context.has_task) {
      fmt::format_to(std::back_inserter(dest), R"(,"task_id":{})", context.task_id);
    }
    std::string_view plugin = context.plugin;
    if (plugin.empty() && name.substr(0, kPluginLoggerPrefix.size()) == kPluginLoggerPrefix) {
      plugin = name.substr(kPluginLoggerPrefix.size());
    }
    if (!plugin.empty()) {
      put(dest, R"(,"plugin":)");
      appendEscaped(plugin, dest);
    }
    put(dest, "}\n");
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(default_executor_id_);
  }

 private:
  // RFC 3339 in UTC with microseconds: 2026-12-02T05:30:13.123456Z.
  static void appendTimestamp(spdlog::log_clock::time_point time, spdlog::memory_buf_t& dest) {
    using std::chrono::duration_cast;
    const auto since = time.time_since_epoch();
    auto secs = duration_cast<std::chrono::seconds>(since);
    auto micros = duration_cast<std::chrono::microseconds>(since - secs).count();
    if (micros < 0) {  // before 1970: borrow a second
      secs -= std::chrono::seconds(1);
      micros += 1000000;
    }
    const auto t = static_cast<time_t>(secs.count());
    struct tm utc {};
    gmtime_r(&t, &utc);
    fmt::format_to(std::back_inserter(dest), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
                   utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                   utc.tm_sec, micros);
  }

  std::string default_executor_id_;
};

}  // namespace

const LogContext& currentLogContext() noexcept { return gCurrentContext; }

TaskLogScope::TaskLogScope(std::uint64_t task_id, std::string_view executor_id) noexcept
    : saved_(gCurrentContext) {
  gCurrentContext.has_task = true;
  gCurrentContext.task_id = task_id;
  if (!executor_id.empty()) gCurrentContext.executor_id = executor_id;
}

TaskLogScope::~TaskLogScope() { gCurrentContext = saved_; }

ExecutorLogScope::ExecutorLogScope(std::string_view executor_id) noexcept
    : saved_(gCurrentContext) {
  gCurrentContext.executor_id = executor_id;
}

ExecutorLogScope::~ExecutorLogScope() { gCurrentContext = saved_; }

std::optional<LogFormat> parseLogFormat(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "text") return LogFormat::kText;
  if (lower == "json") return LogFormat::kJson;
  return std::nullopt;
}

std::unique_ptr<spdlog::formatter> makeLogFormatter(LogFormat format,
                                                    const std::string& text_pattern,
                                                    std::string default_executor_id) {
  if (format == LogFormat::kJson) {
    return std::make_unique<JsonFormatter>(std::move(default_executor_id));
  }
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<ContextFlag>('&').set_pattern(text_pattern);
  return formatter;
}

void appendJsonString(std::string_view text, std::string& out) { appendEscaped(text, out); }

}  // namespace dockhand
