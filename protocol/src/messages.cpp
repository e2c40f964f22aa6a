#include "dockhand/protocol/messages.h"

#include <array>
#include <cmath>

#include <fmt/format.h>

namespace dockhand::protocol {

namespace {
// A block_url is "scheme://host:port" (docs/protocol.md 8.4): a block lives at
// <block_url>/blocks/<id>, so a trailing "/" a sender added is dropped on receipt.
std::string withoutTrailingSlashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

constexpr int kMaxInt = std::numeric_limits<int>::max();

const std::vector<MessageSpec> kSpecs = {
    {MessageType::kHello, "Hello", Direction::kBoth, true},
    {MessageType::kRetrieveAppConfig, "RetrieveAppConfig", Direction::kAgentToDriver, true},
    {MessageType::kRegisterExecutor, "RegisterExecutor", Direction::kAgentToDriver, true},
    {MessageType::kLaunchedExecutor, "LaunchedExecutor", Direction::kAgentToDriver, false},
    {MessageType::kLaunchTask, "LaunchTask", Direction::kDriverToAgent, false},
    {MessageType::kKillTask, "KillTask", Direction::kDriverToAgent, false},
    {MessageType::kStatusUpdate, "StatusUpdate", Direction::kAgentToDriver, false},
    {MessageType::kStopExecutor, "StopExecutor", Direction::kDriverToAgent, false},
    {MessageType::kShutdown, "Shutdown", Direction::kDriverToAgent, false},
    {MessageType::kUpdateDelegationTokens, "UpdateDelegationTokens", Direction::kDriverToAgent,
     false},
    {MessageType::kUpdateExecutorLogLevel, "UpdateExecutorLogLevel", Direction::kDriverToAgent,
     false},
    {MessageType::kDecommissionExecutor, "DecommissionExecutor", Direction::kDriverToAgent, false},
    {MessageType::kExecutorDecommissioning, "ExecutorDecommissioning", Direction::kAgentToDriver,
     true},
    {MessageType::kTaskThreadDump, "TaskThreadDump", Direction::kDriverToAgent, true},
    {MessageType::kRemoveExecutor, "RemoveExecutor", Direction::kAgentToDriver, false},
    {MessageType::kHeartbeat, "Heartbeat", Direction::kBoth, false},
    {MessageType::kGetPeers, "GetPeers", Direction::kAgentToDriver, true},
    {MessageType::kUpdateBlockInfo, "UpdateBlockInfo", Direction::kAgentToDriver, false},
    {MessageType::kAuthenticate, "Authenticate", Direction::kAgentToDriver, true},
    {MessageType::kResumeExecutor, "ResumeExecutor", Direction::kAgentToDriver, true},
};

constexpr std::array<std::string_view, 5> kStateNames = {"RUNNING", "FINISHED", "FAILED", "KILLED",
                                                         "LOST"};

int readInt(const JsonReader& r, std::string_view key, int fallback, int min = 0) {
  return static_cast<int>(r.optionalInt(key, fallback, min, kMaxInt));
}

std::map<std::string, std::vector<std::string>> readAddressMap(const JsonReader& r,
                                                               std::string_view key) {
  std::map<std::string, std::vector<std::string>> out;
  const Json* v = r.find(key);
  if (v == nullptr) return out;
  JsonReader map(*v, r.childPath(key));
  for (const auto& [name, value] : v->items()) {
    (void)value;
    out.emplace(name, map.optionalStringList(name));
  }
  return out;
}

}  // namespace

const std::vector<MessageSpec>& allMessages() { return kSpecs; }

const MessageSpec* findMessage(std::string_view name) {
  for (const auto& spec : kSpecs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const MessageSpec& specOf(MessageType type) { return kSpecs[static_cast<std::size_t>(type)]; }

std::string_view toString(TaskState state) { return kStateNames[static_cast<std::size_t>(state)]; }

std::optional<TaskState> parseTaskState(std::string_view name) {
  for (std::size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == name) return static_cast<TaskState>(i);
  }
  return std::nullopt;
}

// ---- Hello ----
Json toJson(const Hello& m) {
  Json j{{"protocol_version", m.protocol_version}, {"role", m.role}, {"software", m.software}};
  if (m.auth) {
    Json auth{{"scheme", m.auth->scheme}, {"nonce", m.auth->nonce}};
    if (!m.auth->proof.empty()) auth["proof"] = m.auth->proof;
    j["auth"] = std::move(auth);
  }
  return j;
}
Hello fromJson(const Json& j, Tag<Hello>) {
  JsonReader r(j, "");
  Hello m;
  m.protocol_version = static_cast<int>(r.requiredInt("protocol_version", 0, kMaxInt));
  m.role = r.optionalString("role");
  m.software = r.optionalString("software");
  if (const Json* auth = r.find("auth")) {
    JsonReader a(*auth, r.childPath("auth"));
    HelloAuth h;
    h.scheme = a.requiredString("scheme");
    h.nonce = a.requiredString("nonce");
    h.proof = a.optionalString("proof");
    m.auth = std::move(h);
  }
  return m;
}

// ---- Authenticate ----
Json toJson(const Authenticate& m) { return {{"proof", m.proof}}; }
Authenticate fromJson(const Json& j, Tag<Authenticate>) {
  JsonReader r(j, "");
  return Authenticate{.proof = r.requiredString("proof")};
}

// ---- RetrieveAppConfig / AppConfig ----
Json toJson(const RetrieveAppConfig& m) { return {{"resource_profile_id", m.resource_profile_id}}; }
RetrieveAppConfig fromJson(const Json& j, Tag<RetrieveAppConfig>) {
  JsonReader r(j, "");
  RetrieveAppConfig m;
  m.resource_profile_id = readInt(r, "resource_profile_id", 0);
  return m;
}

Json toJson(const ResourceProfile& m) {
  Json executor = Json::object();
  for (const auto& [name, req] : m.executor_resources) {
    Json entry = {{"amount", req.amount}};
    if (!req.discovery_script.empty()) entry["discovery_script"] = req.discovery_script;
    if (!req.vendor.empty()) entry["vendor"] = req.vendor;
    executor[name] = std::move(entry);
  }
  Json task = Json::object();
  for (const auto& [name, amount] : m.task_resources) task[name] = amount;
  return {{"id", m.id}, {"executor_resources", executor}, {"task_resources", task}};
}
ResourceProfile fromJson(const Json& j, Tag<ResourceProfile>) {
  JsonReader r(j, "");
  ResourceProfile m;
  m.id = readInt(r, "id", 0);
  if (const Json* exec = r.find("executor_resources")) {
    JsonReader er(*exec, "/executor_resources");
    for (const auto& [name, value] : exec->items()) {
      (void)value;
      JsonReader one = er.requiredObject(name);
      ExecutorResourceRequest req;
      req.amount = one.requiredInt("amount", 0);
      req.discovery_script = one.optionalString("discovery_script");
      req.vendor = one.optionalString("vendor");
      m.executor_resources.emplace(name, std::move(req));
    }
  }
  if (const Json* task = r.find("task_resources")) {
    JsonReader tr(*task, "/task_resources");
    for (const auto& [name, value] : task->items()) {
      (void)value;
      double amount = tr.optionalNumber(name, 0);
      if (!(amount > 0) || !std::isfinite(amount)) tr.fail(name, "must be a positive number");
      m.task_resources.emplace(name, amount);
    }
  }
  return m;
}

Json toJson(const AppConfig& m) {
  Json j = {{"properties", m.properties}, {"resource_profile", toJson(m.resource_profile)}};
  if (m.log_level) j["log_level"] = *m.log_level;
  if (!m.delegation_tokens.empty()) j["delegation_tokens"] = m.delegation_tokens;
  return j;
}
AppConfig fromJson(const Json& j, Tag<AppConfig>) {
  JsonReader r(j, "");
  AppConfig m;
  m.properties = r.optionalStringMap("properties");
  if (r.has("log_level")) m.log_level = r.requiredString("log_level");
  if (const Json* profile = r.find("resource_profile")) {
    try {
      m.resource_profile = fromJson(*profile, Tag<ResourceProfile>{});
    } catch (const JsonPathError& e) {
      throw JsonPathError("/resource_profile" + (e.path() == "/" ? std::string() : e.path()),
                          e.detail());
    }
  }
  m.delegation_tokens = r.optionalString("delegation_tokens");
  return m;
}

// ---- RegisterExecutor ----
Json toJson(const RegisterExecutor& m) {
  Json resources = Json::object();
  for (const auto& [name, info] : m.resources) {
    resources[name] = {{"name", info.name}, {"addresses", info.addresses}};
  }
  Json j = {{"executor_id", m.executor_id},
            {"hostname", m.hostname},
            {"cores", m.cores},
            {"log_urls", m.log_urls},
            {"attributes", m.attributes},
            {"resources", resources},
            {"resource_profile_id", m.resource_profile_id}};
  if (!m.block_url.empty()) j["block_url"] = m.block_url;
  if (m.waits_for_cores) j["waits_for_cores"] = true;
  if (m.resumes) j["resumes"] = true;
  return j;
}
RegisterExecutor fromJson(const Json& j, Tag<RegisterExecutor>) {
  JsonReader r(j, "");
  RegisterExecutor m;
  m.executor_id = r.requiredString("executor_id");
  if (m.executor_id.empty()) r.fail("executor_id", "must not be empty");
  m.hostname = r.requiredString("hostname");
  m.cores = static_cast<int>(r.requiredInt("cores", 1, kMaxInt));
  m.log_urls = r.optionalStringMap("log_urls");
  m.attributes = r.optionalStringMap("attributes");
  if (const Json* res = r.find("resources")) {
    JsonReader rr(*res, "/resources");
    for (const auto& [name, value] : res->items()) {
      (void)value;
      JsonReader one = rr.requiredObject(name);
      ResourceInfo info;
      info.name = one.optionalString("name", name);
      info.addresses = one.optionalStringList("addresses");
      m.resources.emplace(name, std::move(info));
    }
  }
  m.resource_profile_id = readInt(r, "resource_profile_id", 0);
  m.block_url = withoutTrailingSlashes(r.optionalString("block_url"));
  m.waits_for_cores = r.optionalBool("waits_for_cores", false);
  m.resumes = r.optionalBool("resumes", false);
  return m;
}

// ---- LaunchedExecutor ----
Json toJson(const LaunchedExecutor& m) { return {{"executor_id", m.executor_id}}; }
LaunchedExecutor fromJson(const Json& j, Tag<LaunchedExecutor>) {
  JsonReader r(j, "");
  return LaunchedExecutor{.executor_id = r.requiredString("executor_id")};
}

// ---- TaskDescription / LaunchTask ----
Json toJson(const TaskDescription& m) {
  // Empty maps are left out (their default): every launch's bytes are parsed on the agent's
  // busiest thread.
  Json j = {{"task_id", m.task_id},     {"attempt", m.attempt}, {"name", m.name},
            {"partition", m.partition}, {"runner", m.runner},   {"cpus", m.cpus},
            {"payload", m.payload}};
  if (!m.resources.empty()) j["resources"] = m.resources;
  if (!m.properties.empty()) j["properties"] = m.properties;
  if (!m.inputs.empty()) {
    Json inputs = Json::array();
    for (const auto& in : m.inputs) {
      inputs.push_back(
          {{"id", in.id}, {"url", in.url}, {"size", in.size}, {"checksum", in.checksum}});
    }
    j["inputs"] = std::move(inputs);
  }
  return j;
}
TaskDescription fromJson(const Json& j, Tag<TaskDescription>) {
  JsonReader r(j, "");
  TaskDescription m;
  m.task_id = r.requiredUnsigned("task_id");
  m.attempt = readInt(r, "attempt", 0);
  m.name = r.optionalString("name");
  m.partition = readInt(r, "partition", 0);
  m.runner = r.optionalString("runner", "process");
  if (m.runner.empty()) r.fail("runner", "must not be empty");
  m.cpus = readInt(r, "cpus", 1);
  m.resources = readAddressMap(r, "resources");
  m.properties = r.optionalStringMap("properties");
  if (const Json* payload = r.find("payload")) m.payload = *payload;
  if (const Json* inputs = r.find("inputs")) {
    if (!inputs->is_array()) r.fail("inputs", "expected an array of input blocks");
    for (std::size_t i = 0; i < inputs->size(); ++i) {
      JsonReader in((*inputs)[i], "/inputs/" + std::to_string(i));
      InputBlock block;
      block.id = in.requiredString("id");
      block.url = in.requiredString("url");
      if (in.has("size")) block.size = in.requiredUnsigned("size");
      block.checksum = in.optionalString("checksum");
      m.inputs.push_back(std::move(block));
    }
  }
  return m;
}

Json toJson(const LaunchTask& m) { return {{"task", toJson(m.task)}}; }
LaunchTask fromJson(const Json& j, Tag<LaunchTask>) {
  JsonReader r(j, "");
  const Json* task = r.find("task");
  if (task == nullptr) r.fail("task", "is required (a task description object)");
  try {
    return LaunchTask{.task = fromJson(*task, Tag<TaskDescription>{})};
  } catch (const JsonPathError& e) {
    throw JsonPathError("/task" + (e.path() == "/" ? std::string() : e.path()), e.detail());
  }
}

// ---- KillTask ----
Json toJson(const KillTask& m) {
  return {{"task_id", m.task_id},
          {"executor_id", m.executor_id},
          {"interrupt", m.interrupt},
          {"reason", m.reason}};
}
KillTask fromJson(const Json& j, Tag<KillTask>) {
  JsonReader r(j, "");
  KillTask m;
  m.task_id = r.requiredUnsigned("task_id");
  m.executor_id = r.optionalString("executor_id");
  m.interrupt = r.optionalBool("interrupt", false);
  m.reason = r.optionalString("reason");
  return m;
}

// ---- StatusUpdate ----
Json toJson(const StatusUpdate& m) {
  Json j = {{"executor_id", m.executor_id},
            {"task_id", m.task_id},
            {"state", std::string(toString(m.state))},
            {"cpus", m.cpus}};
  if (!m.resources.empty()) j["resources"] = m.resources;
  if (!m.result.is_null()) j["result"] = m.result;
  if (!m.reason.empty()) j["reason"] = m.reason;
  if (m.exit_code) j["exit_code"] = *m.exit_code;
  if (m.signal) j["signal"] = *m.signal;
  if (!m.stderr_tail.empty()) j["stderr_tail"] = m.stderr_tail;
  if (!m.log_urls.empty()) j["log_urls"] = m.log_urls;
  if (m.fetch_failed) {
    j["fetch_failed"] = {{"block_id", m.fetch_failed->block_id}, {"url", m.fetch_failed->url}};
  }
  if (!m.metrics.empty()) j["metrics"] = toJson(m.metrics);
  return j;
}
StatusUpdate fromJson(const Json& j, Tag<StatusUpdate>) {
  JsonReader r(j, "");
  StatusUpdate m;
  m.executor_id = r.requiredString("executor_id");
  m.task_id = r.requiredUnsigned("task_id");
  std::string state = r.requiredString("state");
  auto parsed = parseTaskState(state);
  if (!parsed) {
    r.fail("state", fmt::format("unknown task state '{}' (expected RUNNING, FINISHED, FAILED, "
                                "KILLED or LOST)",
                                state));
  }
  m.state = *parsed;
  if (const Json* result = r.find("result")) m.result = *result;
  m.reason = r.optionalString("reason");
  if (r.has("exit_code")) {
    m.exit_code = static_cast<int>(r.requiredInt("exit_code", -kMaxInt, kMaxInt));
  }
  if (r.has("signal")) m.signal = static_cast<int>(r.requiredInt("signal", 0, 255));
  m.stderr_tail = r.optionalString("stderr_tail");
  m.log_urls = r.optionalStringMap("log_urls");
  m.cpus = readInt(r, "cpus", 0);
  m.resources = readAddressMap(r, "resources");
  if (r.has("fetch_failed")) {
    const JsonReader f = r.requiredObject("fetch_failed");
    m.fetch_failed =
        FetchFailure{.block_id = f.requiredString("block_id"), .url = f.optionalString("url")};
  }
  // Lenient: a figure a peer got wrong is dropped, never the task's status.
  if (const Json* metrics = r.find("metrics")) m.metrics = taskMetricsFromJson(*metrics, nullptr);
  return m;
}

// ---- Bodiless and small messages ----
Json toJson(const StopExecutor&) { return Json::object(); }
StopExecutor fromJson(const Json& j, Tag<StopExecutor>) {
  JsonReader r(j, "");
  return {};
}
Json toJson(const Shutdown&) { return Json::object(); }
Shutdown fromJson(const Json& j, Tag<Shutdown>) {
  JsonReader r(j, "");
  return {};
}

Json toJson(const UpdateDelegationTokens& m) { return {{"tokens", m.tokens}}; }
UpdateDelegationTokens fromJson(const Json& j, Tag<UpdateDelegationTokens>) {
  JsonReader r(j, "");
  return UpdateDelegationTokens{.tokens = r.requiredString("tokens")};
}

Json toJson(const UpdateExecutorLogLevel& m) { return {{"level", m.level}}; }
UpdateExecutorLogLevel fromJson(const Json& j, Tag<UpdateExecutorLogLevel>) {
  JsonReader r(j, "");
  return UpdateExecutorLogLevel{.level = r.requiredString("level")};
}

Json toJson(const DecommissionExecutor& m) { return {{"reason", m.reason}}; }
DecommissionExecutor fromJson(const Json& j, Tag<DecommissionExecutor>) {
  JsonReader r(j, "");
  return DecommissionExecutor{.reason = r.optionalString("reason")};
}

Json toJson(const ExecutorDecommissioning& m) { return {{"executor_id", m.executor_id}}; }
ExecutorDecommissioning fromJson(const Json& j, Tag<ExecutorDecommissioning>) {
  JsonReader r(j, "");
  return ExecutorDecommissioning{.executor_id = r.requiredString("executor_id")};
}

Json toJson(const TaskThreadDump& m) { return {{"task_id", m.task_id}}; }
TaskThreadDump fromJson(const Json& j, Tag<TaskThreadDump>) {
  JsonReader r(j, "");
  return TaskThreadDump{.task_id = r.requiredUnsigned("task_id")};
}

Json toJson(const RemoveExecutor& m) {
  return {{"executor_id", m.executor_id}, {"reason", m.reason}};
}
RemoveExecutor fromJson(const Json& j, Tag<RemoveExecutor>) {
  JsonReader r(j, "");
  return RemoveExecutor{.executor_id = r.requiredString("executor_id"),
                        .reason = r.optionalString("reason")};
}

Json toJson(const Heartbeat& m) {
  Json j = {{"executor_id", m.executor_id},
            {"running_tasks", m.running_tasks},
            {"sent_at_ms", m.sent_at_ms}};
  if (!m.decommission.is_null()) j["decommission"] = m.decommission;
  if (!m.metrics.empty()) j["metrics"] = toJson(m.metrics);
  return j;
}
Heartbeat fromJson(const Json& j, Tag<Heartbeat>) {
  JsonReader r(j, "");
  Heartbeat m;
  m.executor_id = r.optionalString("executor_id");
  m.running_tasks = readInt(r, "running_tasks", 0);
  if (r.has("sent_at_ms")) m.sent_at_ms = r.requiredUnsigned("sent_at_ms");
  if (const Json* d = r.find("decommission")) {
    if (!d->is_object()) r.fail("decommission", "expected an object");
    m.decommission = *d;
  }
  // Lenient, as StatusUpdate's: a bad figure is dropped, never the heartbeat.
  if (const Json* metrics = r.find("metrics")) m.metrics = agentMetricsFromJson(*metrics, nullptr);
  return m;
}

// ---- Blocks ----
bool isExternalStoreUrl(std::string_view url) {
  return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
}

Json toJson(const BlockInfo& m) {
  return {{"id", m.id},
          {"size", m.size},
          {"checksum", m.checksum},
          {"executor_id", m.executor_id},
          {"url", m.url}};
}
BlockInfo fromJson(const Json& j, Tag<BlockInfo>) {
  JsonReader r(j, "");
  BlockInfo m;
  m.id = r.requiredString("id");
  if (r.has("size")) m.size = r.requiredUnsigned("size");
  m.checksum = r.optionalString("checksum");
  m.executor_id = r.optionalString("executor_id");
  m.url = r.requiredString("url");
  return m;
}

Json toJson(const GetPeers& m) { return {{"executor_id", m.executor_id}}; }
GetPeers fromJson(const Json& j, Tag<GetPeers>) {
  JsonReader r(j, "");
  return GetPeers{.executor_id = r.requiredString("executor_id")};
}

Json toJson(const std::vector<Peer>& peers) {
  Json list = Json::array();
  for (const auto& p : peers) {
    list.push_back({{"executor_id", p.executor_id}, {"block_url", p.block_url}});
  }
  return {{"peers", list}};
}
std::vector<Peer> parsePeers(const Json& reply_body) {
  JsonReader r(reply_body, "");
  const Json* list = r.find("peers");
  std::vector<Peer> out;
  if (list == nullptr) return out;
  if (!list->is_array()) r.fail("peers", "expected an array");
  for (std::size_t i = 0; i < list->size(); ++i) {
    JsonReader p((*list)[i], "/peers/" + std::to_string(i));
    out.push_back(Peer{.executor_id = p.requiredString("executor_id"),
                       .block_url = withoutTrailingSlashes(p.requiredString("block_url"))});
  }
  return out;
}

Json toJson(const UpdateBlockInfo& m) {
  Json added = Json::array();
  for (const auto& b : m.added) added.push_back(toJson(b));
  return {{"executor_id", m.executor_id}, {"added", added}, {"removed", m.removed}};
}
namespace {

// The member `key` of r's object, an array of blocks (absent: none); errors name the entry.
std::vector<BlockInfo> readBlocks(const JsonReader& r, std::string_view key) {
  std::vector<BlockInfo> blocks;
  const Json* list = r.find(key);
  if (list == nullptr) return blocks;
  if (!list->is_array()) r.fail(key, "expected an array of blocks");
  for (std::size_t i = 0; i < list->size(); ++i) {
    try {
      blocks.push_back(fromJson((*list)[i], Tag<BlockInfo>{}));
    } catch (const JsonPathError& e) {
      throw JsonPathError(
          r.childPath(key) + "/" + std::to_string(i) + (e.path() == "/" ? "" : e.path()),
          e.detail());
    }
  }
  return blocks;
}

}  // namespace

UpdateBlockInfo fromJson(const Json& j, Tag<UpdateBlockInfo>) {
  JsonReader r(j, "");
  UpdateBlockInfo m;
  m.executor_id = r.requiredString("executor_id");
  m.added = readBlocks(r, "added");
  m.removed = r.optionalStringList("removed");
  return m;
}

// ---- ResumeExecutor ----
namespace {

std::vector<std::uint64_t> readTaskIds(const JsonReader& r, std::string_view key) {
  std::vector<std::uint64_t> ids;
  const Json* list = r.find(key);
  if (list == nullptr) return ids;
  if (!list->is_array()) r.fail(key, "expected an array of task ids");
  ids.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    const Json& id = (*list)[i];
    if (!id.is_number_integer() || (!id.is_number_unsigned() && id.get<std::int64_t>() < 0)) {
      throw JsonPathError(r.childPath(key) + "/" + std::to_string(i),
                          "expected a task id (an integer 0...2^64-1)");
    }
    ids.push_back(id.get<std::uint64_t>());
  }
  return ids;
}

}  // namespace

Json toJson(const ResumeExecutor& m) {
  Json blocks = Json::array();
  for (const auto& b : m.blocks) blocks.push_back(toJson(b));
  return {{"executor_id", m.executor_id}, {"running", m.running}, {"blocks", blocks}};
}
ResumeExecutor fromJson(const Json& j, Tag<ResumeExecutor>) {
  JsonReader r(j, "");
  ResumeExecutor m;
  m.executor_id = r.requiredString("executor_id");
  m.running = readTaskIds(r, "running");
  m.blocks = readBlocks(r, "blocks");
  return m;
}

Json toJson(const ResumeAccepted& m) { return {{"tasks", m.tasks}}; }
ResumeAccepted fromJson(const Json& j, Tag<ResumeAccepted>) {
  JsonReader r(j, "");
  return ResumeAccepted{.tasks = readTaskIds(r, "tasks")};
}

}  // namespace dockhand::protocol
