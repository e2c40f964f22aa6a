// parseTaskFast: a launch's task_json read into a TaskSpec from the JSON parser's events, with
// no tree (the agent's core thread runs this for every library task: the tree was most of its
// cost). It accepts only what parseTask's tree path would accept with the same result, and gives
// up on anything else — a missing or mistyped field, a duplicate key, an unknown payload key —
// so that the tree path, the one place with the rules' messages, decides those.
// tests/plugins/library/task_sax_test.cpp holds the two to each other.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "library_config.h"
#include "task_json.h"

namespace dockhand::plugins::library {
namespace {

using nlohmann::json;

class TaskEvents final : public nlohmann::json_sax<json> {
 public:
  std::optional<TaskSpec> result() {
    if (!ended_ || !has_task_id_ || !has_work_dir_ || !has_payload_ || spec_.library.empty() ||
        spec_.function.empty()) {
      return std::nullopt;
    }
    if (has_args_) spec_.args = args_.dump();
    return std::move(spec_);
  }

  bool null() override {
    // A null attempt, partition or inputs is as if absent.
    if (place_ == Place::kTop) return key_ == "attempt" || key_ == "partition" || key_ == "inputs";
    return value(nullptr);
  }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override {
    if (place_ == Place::kTop && key_ == "partition") {
      spec_.partition = v;
      return true;
    }
    return value(v);
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (place_ == Place::kTop) {
      if (key_ == "task_id") {
        spec_.task_id = v;
        return has_task_id_ = true;
      }
      if (key_ == "attempt" && v <= std::numeric_limits<std::uint32_t>::max()) {
        spec_.attempt = static_cast<std::uint32_t>(v);
        return true;
      }
      if (key_ == "partition" &&
          v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        spec_.partition = static_cast<std::int64_t>(v);
        return true;
      }
    }
    return value(v);
  }
  bool number_float(number_float_t v, const string_t& /*text*/) override { return value(v); }
  bool string(string_t& v) override {
    if (place_ == Place::kTop && key_ == "work_dir") {
      if (!isTaskWorkDir(v)) return false;
      spec_.work_dir = std::move(v);
      return has_work_dir_ = true;
    }
    if (place_ == Place::kInputs) {
      if (!isSafeFileName(v)) return false;
      spec_.inputs.push_back(std::move(v));
      return true;
    }
    if (place_ == Place::kPayload && (key_ == "library" || key_ == "function")) {
      if (v.empty()) return false;
      (key_ == "library" ? spec_.library : spec_.function) = std::move(v);
      return true;
    }
    return value(std::move(v));
  }
  bool binary(binary_t& /*v*/) override { return false; }

  bool start_object(std::size_t /*size*/) override {
    if (!started_) {
      started_ = true;
      place_ = Place::kTop;
      return true;
    }
    if (place_ == Place::kTop && key_ == "payload") {
      place_ = Place::kPayload;
      return has_payload_ = true;
    }
    return open(json::object());
  }
  bool key(string_t& name) override {
    if (place_ == Place::kArgs || place_ == Place::kSkip) {
      key_ = std::move(name);
      return true;
    }
    if (place_ == Place::kTop) {
      if (!isKnown(name)) {
        place_ = Place::kSkipNext;  // any key but these is not read: its value is skipped
      } else if (std::find(seen_.begin(), seen_.end(), name) != seen_.end()) {
        return false;  // a known key twice: the tree keeps the last; the tree path decides
      } else {
        seen_.push_back(name);
      }
      key_ = std::move(name);
      return true;
    }
    if (place_ == Place::kPayload) {
      if (name != "library" && name != "function" && name != "args") return false;
      if (std::find(payload_keys_.begin(), payload_keys_.end(), name) != payload_keys_.end()) {
        return false;
      }
      payload_keys_.push_back(name);
      key_ = std::move(name);
      if (key_ == "args") {
        has_args_ = true;
        place_ = Place::kArgsNext;
      }
      return true;
    }
    return false;
  }
  bool end_object() override {
    if (place_ == Place::kArgs || place_ == Place::kSkip) return close();
    if (place_ == Place::kPayload) {
      place_ = Place::kTop;
      return true;
    }
    if (place_ == Place::kTop) {
      ended_ = true;
      place_ = Place::kDone;
      return true;
    }
    return false;
  }
  bool start_array(std::size_t /*size*/) override {
    if (place_ == Place::kTop && key_ == "inputs") {
      place_ = Place::kInputs;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (place_ == Place::kInputs) {
      place_ = Place::kTop;
      return true;
    }
    if (place_ == Place::kArgs || place_ == Place::kSkip) return close();
    return false;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  // Where the next event lands. kSkipNext and kArgsNext: the value of a skipped key or of
  // "args" comes next; kSkip and kArgs: inside it (nested containers).
  enum class Place { kBefore, kTop, kPayload, kInputs, kArgsNext, kArgs, kSkipNext, kSkip, kDone };

  static bool isKnown(const std::string& name) {
    return name == "task_id" || name == "work_dir" || name == "attempt" || name == "partition" ||
           name == "inputs" || name == "payload";
  }

  // A scalar where one is not read by name: part of args, of a skipped value, or the whole of
  // either; anywhere else it is not what the tree path accepts. A JSON value is made of it for
  // args only: a skipped one is dropped as it comes.
  template <class Scalar>
  bool value(Scalar&& v) {
    switch (place_) {
      case Place::kArgsNext:
        args_ = json(std::forward<Scalar>(v));
        place_ = Place::kPayload;
        return true;
      case Place::kSkipNext:
        place_ = Place::kTop;
        return true;
      case Place::kArgs:
        put(json(std::forward<Scalar>(v)));
        return true;
      case Place::kSkip:
        return true;
      default:
        return false;
    }
  }
  // A container opens inside args or a skipped value (or is one of them).
  bool open(json container) {
    switch (place_) {
      case Place::kArgsNext:
        args_ = std::move(container);
        open_.push_back(&args_);
        place_ = Place::kArgs;
        return true;
      case Place::kArgs:
        open_.push_back(put(std::move(container)));
        return true;
      case Place::kSkipNext:
        place_ = Place::kSkip;
        [[fallthrough]];
      case Place::kSkip:
        ++skipping_;
        return true;
      default:
        return false;
    }
  }
  bool close() {
    if (place_ == Place::kSkip) {
      if (--skipping_ == 0) place_ = Place::kTop;
      return true;
    }
    open_.pop_back();
    if (open_.empty()) place_ = Place::kPayload;
    return true;
  }
  // Into the innermost open container of args (under key_ for an object: the last one wins, as
  // in the tree); returns where it went.
  json* put(json v) {
    json& into = *open_.back();
    if (into.is_object()) return &(into[key_] = std::move(v));
    into.push_back(std::move(v));
    return &into.back();
  }

  TaskSpec spec_;
  Place place_ = Place::kBefore;
  bool started_ = false;
  bool ended_ = false;
  bool has_task_id_ = false;
  bool has_work_dir_ = false;
  bool has_payload_ = false;
  bool has_args_ = false;
  std::string key_;
  std::vector<std::string> seen_;          // known top-level keys met
  std::vector<std::string> payload_keys_;  // payload keys met
  json args_;
  std::vector<json*> open_;  // args' open containers, outermost first
  int skipping_ = 0;         // depth inside a skipped value
};

}  // namespace

std::optional<TaskSpec> parseTaskFast(std::string_view task_json) {
  TaskEvents events;
  if (!json::sax_parse(task_json.begin(), task_json.end(), &events)) return std::nullopt;
  return events.result();
}

}  // namespace dockhand::plugins::library
