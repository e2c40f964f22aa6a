// How the agent and the driver write their log lines (docs/operations.md, "Structured logs"):
// text for people, or one JSON object per line for journald and log shippers. Both carry the
// calling thread's log context: the task a line is about, the executor, the plugin.
//
// The context is set where work about a task (or an agent, or a plugin) is logged, for the
// length of a scope:
//
//   {
//     TaskLogScope scope(task.task_id);
//     logger("executor")->info("launching on runner {}", name);  // carries task_id
//   }
//
// A scope only stores a number and string views in a thread-local: no allocation, no lock;
// what a view names must outlive the scope. Formatters read the context of the thread that
// logs, so the loggers must be synchronous (as logger() makes them: the default logger's
// sinks, called on the caller's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/formatter.h>

namespace dockhand {

struct LogContext {
  bool has_task = false;
  std::uint64_t task_id = 0;
  std::string_view executor_id;  // empty: the formatter's default (the agent's own id)
  std::string_view plugin;       // empty: from the logger's name "plugin.<name>", if it is one
};

// The calling thread's context.
const LogContext& currentLogContext() noexcept;

// Sets the calling thread's task (and optionally executor) for its lifetime; the context
// before it comes back when it ends. Scopes nest.
class [[nodiscard]] TaskLogScope {
 public:
  explicit TaskLogScope(std::uint64_t task_id, std::string_view executor_id = {}) noexcept;
  ~TaskLogScope();
  TaskLogScope(const TaskLogScope&) = delete;
  TaskLogScope& operator=(const TaskLogScope&) = delete;

 private:
  LogContext saved_;
};

// Sets the calling thread's executor (a driver's lines about one agent) for its lifetime.
class [[nodiscard]] ExecutorLogScope {
 public:
  explicit ExecutorLogScope(std::string_view executor_id) noexcept;
  ~ExecutorLogScope();
  ExecutorLogScope(const ExecutorLogScope&) = delete;
  ExecutorLogScope& operator=(const ExecutorLogScope&) = delete;

 private:
  LogContext saved_;
};

enum class LogFormat { kText, kJson };

// "text" or "json" (case-insensitive); nullopt for anything else.
std::optional<LogFormat> parseLogFormat(std::string_view name);

// The formatter for `format`.
//   kText: spdlog's `text_pattern`, in which %& stands for the context: " task_id=N" when the
//          line is about a task, " executor_id=X" when the context names an executor.
//   kJson: {"timestamp":"2026-12-02T05:30:13.123456Z","level":"info","logger":"executor",
//          "message":"...","executor_id":"a1","task_id":7,"plugin":"process"}, one line each;
//          executor_id is the context's, else `default_executor_id` (omitted when both are
//          empty); task_id and plugin only where they apply. Strings are escaped as JSON
//          requires; bytes that are not UTF-8 become U+FFFD. `text_pattern` is unused.
std::unique_ptr<spdlog::formatter> makeLogFormatter(LogFormat format,
                                                    const std::string& text_pattern,
                                                    std::string default_executor_id = {});

// Appends `text` to `out` as a JSON string (quotes included): '"', '\\' and control
// characters escaped, invalid UTF-8 replaced by U+FFFD.
void appendJsonString(std::string_view text, std::string& out);

}  // namespace dockhand
