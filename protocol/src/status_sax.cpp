// readStatusUpdateFrame (task_frames.h): a StatusUpdate frame read from the JSON parser's
// events into the message, with no tree. The rules it applies are the tree codec's
// (decodeEnvelope, then fromJson(StatusUpdate) and taskMetricsFromJson); where following one
// would take more than a line — a repeated key, an unknown key, a number of another type, a
// figure or a member the tree reader would drop — it gives up instead, and the caller asks the
// tree codec, which says what is wrong.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/task_frames.h"
#include "dockhand/protocol/usage.h"

namespace dockhand::protocol {
namespace {

using nlohmann::json;

// The largest value of an int member.
constexpr std::uint64_t kLargestInt = std::numeric_limits<int>::max();

// Where the parser is: the object or array it is inside.
enum class Place {
  kRoot,
  kBody,
  kLogUrls,
  kResources,
  kAddresses,
  kFetchFailed,
  kMetrics,
  kCustom,
  kResult
};

// The body's members, each a bit of `seen_` (a repeated key gives up).
enum Member : std::uint32_t {
  kCpus = 1U << 0,
  kExecutorId = 1U << 1,
  kExitCode = 1U << 2,
  kFetchFailed = 1U << 3,
  kLogUrls = 1U << 4,
  kMetrics = 1U << 5,
  kReason = 1U << 6,
  kResources = 1U << 7,
  kResult = 1U << 8,
  kSignal = 1U << 9,
  kState = 1U << 10,
  kStderrTail = 1U << 11,
  kTaskId = 1U << 12,
  kBody = 1U << 13,  // the envelope's two
  kType = 1U << 14,
};

std::uint32_t bodyMember(std::string_view key) {
  static constexpr std::pair<std::string_view, Member> kMembers[] = {
      {"cpus", kCpus},          {"executor_id", kExecutorId},
      {"exit_code", kExitCode}, {"fetch_failed", kFetchFailed},
      {"log_urls", kLogUrls},   {"metrics", kMetrics},
      {"reason", kReason},      {"resources", kResources},
      {"result", kResult},      {"signal", kSignal},
      {"state", kState},        {"stderr_tail", kStderrTail},
      {"task_id", kTaskId}};
  for (const auto& [name, member] : kMembers) {
    if (name == key) return member;
  }
  return 0;
}

// One scalar event, whichever its type.
struct Scalar {
  enum class Kind { kNull, kBool, kInt, kUnsigned, kFloat, kString } kind = Kind::kNull;
  bool b = false;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double d = 0;
  std::string* s = nullptr;

  json toJson() const {
    switch (kind) {
      case Kind::kBool:
        return b;
      case Kind::kInt:
        return i;
      case Kind::kUnsigned:
        return u;
      case Kind::kFloat:
        return d;
      case Kind::kString:
        return std::move(*s);
      case Kind::kNull:
        break;
    }
    return nullptr;
  }
};
using Kind = Scalar::Kind;

class StatusEvents final : public nlohmann::json_sax<json> {
 public:
  std::optional<StatusUpdate> take() {
    const std::uint32_t required = kBody | kType | kExecutorId | kTaskId | kState;
    if ((has_ & required) != required) return std::nullopt;
    return std::move(update_);
  }

  bool null() override { return scalar(Scalar{}); }
  bool boolean(bool v) override {
    Scalar s{Kind::kBool};
    s.b = v;
    return scalar(s);
  }
  bool number_integer(number_integer_t v) override {
    Scalar s{Kind::kInt};
    s.i = v;
    return scalar(s);
  }
  bool number_unsigned(number_unsigned_t v) override {
    Scalar s{Kind::kUnsigned};
    s.u = v;
    return scalar(s);
  }
  bool number_float(number_float_t v, const string_t& /*text*/) override {
    Scalar s{Kind::kFloat};
    s.d = v;
    return scalar(s);
  }
  bool string(string_t& v) override {
    Scalar s{Kind::kString};
    s.s = &v;
    return scalar(s);
  }
  bool binary(binary_t& /*v*/) override { return false; }

  bool start_object(std::size_t /*size*/) override { return open(/*object=*/true); }
  bool start_array(std::size_t /*size*/) override { return open(/*object=*/false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    switch (places_[depth_ - 1]) {
      case Place::kRoot:
        return see(k == "body" ? std::uint32_t{kBody} : k == "type" ? std::uint32_t{kType} : 0U, k);
      case Place::kBody:
        return see(bodyMember(k), k);
      case Place::kFetchFailed:
        if (k != "block_id" && k != "url") return false;
        return once(fetch_seen_, k == "url" ? 2U : 1U, k);
      case Place::kMetrics:
        return metricKey(k);
      case Place::kCustom:
        if (!custom_seen_.insert(k).second) return false;
        break;
      case Place::kResult:
        result_key_ = std::move(k);
        return true;
      default:
        break;
    }
    key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  // A member's key: false when unknown (0) or repeated.
  bool see(std::uint32_t member, string_t& k) {
    if (member == 0) return false;
    member_ = member;
    return once(seen_, member, k);
  }
  bool once(std::uint32_t& seen, std::uint32_t bit, string_t& k) {
    if ((seen & bit) != 0) return false;
    seen |= bit;
    key_ = std::move(k);
    return true;
  }

  bool metricKey(string_t& k) {
    std::uint32_t bit = 1;
    figure_ = nullptr;
    for (const auto& field : kTaskMetricFields) {
      if (field.name == k) {
        figure_ = &(update_.metrics.*field.member);
        return once(metrics_seen_, bit, k);
      }
      bit <<= 1;
    }
    return k == "custom" && once(metrics_seen_, bit, k);
  }

  bool open(bool object) {
    if (depth_ == kMaxNestingDepth) return false;
    std::optional<Place> next;
    if (depth_ == 0) {
      if (object) next = Place::kRoot;
    } else {
      next = inside(places_[depth_ - 1], object);
    }
    if (!next) return false;
    if (*next == Place::kResult) {
      json fresh = object ? json::object() : json::array();
      if (result_depth_ == 0) {
        update_.result = std::move(fresh);
        result_[result_depth_++] = &update_.result;
      } else {
        json* inner = &place(std::move(fresh));
        result_[result_depth_++] = inner;
      }
    } else if (*next == Place::kAddresses) {
      addresses_ = &update_.resources[key_];
      addresses_->clear();  // a repeated name: the last one counts, as in a tree
    } else if (*next == Place::kFetchFailed) {
      update_.fetch_failed.emplace();
    }
    places_[depth_++] = *next;
    return true;
  }

  // What an object (or array) opened in `where` holds, or nullopt where none is read here.
  std::optional<Place> inside(Place where, bool object) const {
    switch (where) {
      case Place::kRoot:
        if (object && member_ == kBody) return Place::kBody;
        break;
      case Place::kBody:
        if (member_ == kResult) return Place::kResult;
        if (!object) break;
        if (member_ == kLogUrls) return Place::kLogUrls;
        if (member_ == kResources) return Place::kResources;
        if (member_ == kFetchFailed) return Place::kFetchFailed;
        if (member_ == kMetrics) return Place::kMetrics;
        break;
      case Place::kResources:
        if (!object) return Place::kAddresses;
        break;
      case Place::kMetrics:
        if (object && figure_ == nullptr) return Place::kCustom;
        break;
      case Place::kResult:
        return Place::kResult;
      default:
        break;
    }
    return std::nullopt;
  }

  bool close() {
    const Place ended = places_[--depth_];
    if (ended == Place::kResult) --result_depth_;
    if (ended == Place::kFetchFailed && (fetch_seen_ & 1U) == 0) return false;
    if (ended == Place::kBody) has_ |= kBody;
    return true;
  }

  // A value inside the result being built: appended to its array or set in its object.
  json& place(json value) {
    json& parent = *result_[result_depth_ - 1];
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return parent.back();
    }
    return parent[result_key_] = std::move(value);
  }

  bool scalar(const Scalar& v) {
    if (depth_ == 0) return false;
    switch (places_[depth_ - 1]) {
      case Place::kRoot:
        if (member_ != kType || v.kind != Kind::kString || *v.s != "StatusUpdate") return false;
        has_ |= kType;
        return true;
      case Place::kBody:
        return bodyScalar(v);
      case Place::kLogUrls:
        if (v.kind != Kind::kString) return false;
        update_.log_urls[key_] = std::move(*v.s);
        return true;
      case Place::kResources:  // a null list of addresses is an empty one
        if (v.kind != Kind::kNull) return false;
        update_.resources[key_].clear();
        return true;
      case Place::kAddresses:
        if (v.kind != Kind::kString) return false;
        addresses_->push_back(std::move(*v.s));
        return true;
      case Place::kFetchFailed:
        if (v.kind == Kind::kNull && key_ == "url") return true;
        if (v.kind != Kind::kString) return false;
        (key_ == "url" ? update_.fetch_failed->url : update_.fetch_failed->block_id) =
            std::move(*v.s);
        return true;
      case Place::kMetrics:
        return metricScalar(v);
      case Place::kCustom:
        return customScalar(v);
      case Place::kResult:
        place(v.toJson());
        return true;
    }
    return false;
  }

  bool bodyScalar(const Scalar& v) {
    const bool null = v.kind == Kind::kNull;
    switch (member_) {
      case kExecutorId:
        if (v.kind != Kind::kString) return false;
        update_.executor_id = std::move(*v.s);
        break;
      case kTaskId:
        if (v.kind != Kind::kUnsigned) return false;
        update_.task_id = v.u;
        break;
      case kState: {
        if (v.kind != Kind::kString) return false;
        auto state = parseTaskState(*v.s);
        if (!state) return false;
        update_.state = *state;
        break;
      }
      case kCpus:
        if (null) return true;
        if (v.kind != Kind::kUnsigned || v.u > kLargestInt) return false;
        update_.cpus = static_cast<int>(v.u);
        break;
      case kExitCode:
        if (null) return true;
        if (v.kind == Kind::kUnsigned && v.u <= kLargestInt) {
          update_.exit_code = static_cast<int>(v.u);
        } else if (v.kind == Kind::kInt && v.i >= -static_cast<std::int64_t>(kLargestInt)) {
          update_.exit_code = static_cast<int>(v.i);
        } else {
          return false;
        }
        break;
      case kSignal:
        if (null) return true;
        if (v.kind != Kind::kUnsigned || v.u > 255) return false;
        update_.signal = static_cast<int>(v.u);
        break;
      case kReason:
      case kStderrTail:
        if (null) return true;
        if (v.kind != Kind::kString) return false;
        (member_ == kReason ? update_.reason : update_.stderr_tail) = std::move(*v.s);
        break;
      case kResult:
        update_.result = v.toJson();
        break;
      default:  // log_urls, resources, fetch_failed, metrics: null is as if absent
        return null;
    }
    has_ |= member_;
    return true;
  }

  // A known figure: a non-negative integer is kept, a negative one or null dropped (as the
  // tree reader drops them); "custom": null dropped.
  bool metricScalar(const Scalar& v) {
    if (v.kind == Kind::kNull) return true;
    if (figure_ == nullptr) return false;
    if (v.kind == Kind::kUnsigned) {
      *figure_ = v.u;
      return true;
    }
    return v.kind == Kind::kInt;
  }

  // A runner's own figure: a finite non-negative number is kept, anything else dropped.
  bool customScalar(const Scalar& v) {
    double number = 0;
    if (v.kind == Kind::kUnsigned) {
      number = static_cast<double>(v.u);
    } else if (v.kind == Kind::kFloat) {
      number = v.d;
    } else {
      return true;
    }
    if (std::isfinite(number) && number >= 0) update_.metrics.custom[key_] = number;
    return true;
  }

  StatusUpdate update_;
  // The open objects and arrays, innermost last (a frame nests no deeper: decodeEnvelope's
  // limit), and of them the result's.
  std::array<Place, kMaxNestingDepth> places_{};
  std::size_t depth_ = 0;
  std::array<json*, kMaxNestingDepth> result_{};
  std::size_t result_depth_ = 0;
  std::string key_;           // the last key outside the result
  std::string result_key_;    // the last key inside it
  std::uint32_t member_ = 0;  // the member of the body (or envelope) being read
  std::uint32_t seen_ = 0;
  std::uint32_t has_ = 0;  // read, and not null
  std::uint32_t fetch_seen_ = 0;
  std::uint32_t metrics_seen_ = 0;
  std::optional<std::uint64_t>* figure_ = nullptr;  // the known figure being read
  std::vector<std::string>* addresses_ = nullptr;
  std::set<std::string, std::less<>> custom_seen_;
};

}  // namespace

std::optional<StatusUpdate> readStatusUpdateFrame(std::string_view frame,
                                                  std::size_t max_frame_bytes) {
  // decodeEnvelope's checks on the text, which its parser cannot make.
  if (frame.empty() || frame.size() > max_frame_bytes ||
      frame.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  StatusEvents events;
  if (!json::sax_parse(frame.begin(), frame.end(), &events)) return std::nullopt;
  return events.take();
}

}  // namespace dockhand::protocol
