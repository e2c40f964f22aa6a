// The messages of the wire protocol: one struct per message body, with its direction and
// whether it is an ask (the sender waits for a Reply). docs/protocol.md documents each field.
//
// Decoding is strict about what it needs (a missing or mistyped field is an error naming its
// JSON path) and lenient about what it does not know (unknown fields are ignored, so a newer
// peer may add optional fields without a protocol version bump).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/json_reader.h"
#include "dockhand/protocol/usage.h"

namespace dockhand::protocol {

// A body that does not match its message's schema; path() is a JSON pointer into the body.
using BodyError = JsonPathError;

enum class MessageType {
  kHello,
  kRetrieveAppConfig,
  kRegisterExecutor,
  kLaunchedExecutor,
  kLaunchTask,
  kKillTask,
  kStatusUpdate,
  kStopExecutor,
  kShutdown,
  kUpdateDelegationTokens,
  kUpdateExecutorLogLevel,
  kDecommissionExecutor,
  kExecutorDecommissioning,
  kTaskThreadDump,
  kRemoveExecutor,
  kHeartbeat,
  kGetPeers,
  kUpdateBlockInfo,
  kAuthenticate,
  kResumeExecutor,
};

enum class Direction { kAgentToDriver, kDriverToAgent, kBoth };

struct MessageSpec {
  MessageType type;
  std::string_view name;
  Direction direction;
  bool ask;  // the sender expects a Reply
};

// Every message of the protocol, in documentation order.
const std::vector<MessageSpec>& allMessages();
// The spec for a wire name, or nullptr for an unknown type.
const MessageSpec* findMessage(std::string_view name);
const MessageSpec& specOf(MessageType type);

// ---- Shared value types -------------------------------------------------------------------

enum class TaskState { kRunning, kFinished, kFailed, kKilled, kLost };
std::string_view toString(TaskState state);
std::optional<TaskState> parseTaskState(std::string_view name);
inline bool isTerminal(TaskState s) { return s != TaskState::kRunning; }

// What an executor asks for a resource (the driver's resource profile).
struct ExecutorResourceRequest {
  std::int64_t amount = 0;
  std::string discovery_script;
  std::string vendor;
};

struct ResourceProfile {
  int id = 0;
  std::map<std::string, ExecutorResourceRequest> executor_resources;
  std::map<std::string, double> task_resources;  // amount per task (fractions allowed)
};

// A discovered resource: its name and the addresses this agent has.
struct ResourceInfo {
  std::string name;
  std::vector<std::string> addresses;
};

// A block the task needs: the agent fetches it into the task's input directory first.
struct InputBlock {
  std::string id;   // e.g. "shuffle_0_3_1"
  std::string url;  // where to GET it (a block server URL)
  std::uint64_t size = 0;
  std::string checksum;  // "xxh64:<16 hex digits>"; empty = not checked
};

// Where a block lives. `executor_id` is the holder, and `url` where a reader GETs it. With no
// executor_id the block is out of the agents (docs/protocol.md 8.19): in an external store when
// `url` is an http:// or https:// URL (isExternalStoreUrl), readers GET it there; else in the
// cluster's shared fallback store, read through any agent's block server.
struct BlockInfo {
  std::string id;
  std::uint64_t size = 0;
  std::string checksum;
  std::string executor_id;
  std::string url;
};

// True for a URL a reader GETs a block from directly (http:// or https://), as opposed to a
// fallback-store location ("fallback:<id>", a path).
bool isExternalStoreUrl(std::string_view url);

struct TaskDescription {
  std::uint64_t task_id = 0;  // unique per launch (a retry gets a new task_id)
  int attempt = 0;
  std::string name;
  int partition = 0;
  std::string runner = "process";
  int cpus = 1;
  std::map<std::string, std::vector<std::string>> resources;  // name -> assigned addresses
  std::map<std::string, std::string> properties;
  Json payload = Json::object();   // runner-specific
  std::vector<InputBlock> inputs;  // fetched before the task starts
};

// ---- Message bodies -----------------------------------------------------------------------

// Hello's `auth` member (docs/protocol.md 6.2, docs/security.md): the sender's fresh nonce
// and, from the driver, its proof over both nonces.
struct HelloAuth {
  std::string scheme = "hmac-sha256";
  std::string nonce;  // 32 to 128 hex digits
  std::string proof;  // driver only: 64 hex digits
};

struct Hello {
  static constexpr MessageType kType = MessageType::kHello;
  int protocol_version = kProtocolVersion;
  std::string role;                              // "agent" or "driver"
  std::string software;                          // e.g. "dockhand 0.1.0"
  std::optional<HelloAuth> auth = std::nullopt;  // absent: the sender does not authenticate
};

// The agent's proof, after the driver's Hello proved the driver (docs/protocol.md 8.20).
struct Authenticate {
  static constexpr MessageType kType = MessageType::kAuthenticate;
  std::string proof;  // 64 hex digits
};

struct RetrieveAppConfig {
  static constexpr MessageType kType = MessageType::kRetrieveAppConfig;
  int resource_profile_id = 0;
};

// Reply body of RetrieveAppConfig.
struct AppConfig {
  std::map<std::string, std::string> properties;
  std::optional<std::string> log_level;
  ResourceProfile resource_profile;
  std::string delegation_tokens;  // base64; empty when none
};

struct RegisterExecutor {
  static constexpr MessageType kType = MessageType::kRegisterExecutor;
  std::string executor_id;
  std::string hostname;
  int cores = 0;
  std::map<std::string, std::string> log_urls;
  std::map<std::string, std::string> attributes;
  std::map<std::string, ResourceInfo> resources;
  int resource_profile_id = 0;
  std::string block_url;  // the agent's block server, empty when none
  // The agent holds a LaunchTask that does not fit its free cores until it does (protocol.md
  // 7.5): a driver may send it tasks ahead. Sent only when true.
  bool waits_for_cores = false;
  // The agent keeps its tasks and blocks when its connection drops and comes back with
  // ResumeExecutor (protocol.md 6.6): a driver may hold its work for a grace window. Sent
  // only when true.
  bool resumes = false;
};

// Ask (agent -> driver), the first message after Hello on a new connection of an agent that
// was registered and lost its connection (protocol.md 6.6): it is back, with these tasks and
// blocks. Reply body: ResumeAccepted. Refused with not_resumable when the driver no longer
// holds the agent (it was declared lost, or the driver restarted).
struct ResumeExecutor {
  static constexpr MessageType kType = MessageType::kResumeExecutor;
  std::string executor_id;
  // Tasks the agent runs, or whose final status it has not delivered yet.
  std::vector<std::uint64_t> running;
  std::vector<BlockInfo> blocks;  // every block the agent holds
};

// Reply body of ResumeExecutor: the tasks the driver counts as running on the agent. The agent
// answers each one it no longer runs with its final status (again, if it had sent it before
// the connection dropped), or LOST when it never received its launch.
struct ResumeAccepted {
  std::vector<std::uint64_t> tasks;
};

struct LaunchedExecutor {
  static constexpr MessageType kType = MessageType::kLaunchedExecutor;
  std::string executor_id;
};

struct LaunchTask {
  static constexpr MessageType kType = MessageType::kLaunchTask;
  TaskDescription task;
};

struct KillTask {
  static constexpr MessageType kType = MessageType::kKillTask;
  std::uint64_t task_id = 0;
  std::string executor_id;
  bool interrupt = false;
  std::string reason;
};

// A FAILED task's input block that could not be fetched (Spark's FetchFailed): the block, and
// the URL the launch named for it. The driver takes the block as gone from that holder.
struct FetchFailure {
  std::string block_id;
  std::string url;
  bool operator==(const FetchFailure&) const = default;
};

struct StatusUpdate {
  static constexpr MessageType kType = MessageType::kStatusUpdate;
  std::string executor_id;
  std::uint64_t task_id = 0;
  TaskState state = TaskState::kRunning;
  Json result;         // FINISHED: the task's result
  std::string reason;  // FAILED / KILLED / LOST: why
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string stderr_tail;
  int cpus = 0;
  std::map<std::string, std::vector<std::string>> resources;
  // Where the agent serves this task's logs, by stream ("stdout", "stderr"); may be empty.
  std::map<std::string, std::string> log_urls;
  // FAILED only: the task failed because this input could not be fetched (8.8).
  std::optional<FetchFailure> fetch_failed;
  // Terminal states: what the task cost (usage.h); empty when nothing was measured.
  TaskMetrics metrics;
  bool operator==(const StatusUpdate&) const = default;
};

struct StopExecutor {
  static constexpr MessageType kType = MessageType::kStopExecutor;
};

struct Shutdown {
  static constexpr MessageType kType = MessageType::kShutdown;
};

struct UpdateDelegationTokens {
  static constexpr MessageType kType = MessageType::kUpdateDelegationTokens;
  std::string tokens;  // base64
};

struct UpdateExecutorLogLevel {
  static constexpr MessageType kType = MessageType::kUpdateExecutorLogLevel;
  std::string level;
};

struct DecommissionExecutor {
  static constexpr MessageType kType = MessageType::kDecommissionExecutor;
  std::string reason;
};

struct ExecutorDecommissioning {
  static constexpr MessageType kType = MessageType::kExecutorDecommissioning;
  std::string executor_id;
};

struct TaskThreadDump {
  static constexpr MessageType kType = MessageType::kTaskThreadDump;
  std::uint64_t task_id = 0;
};

struct RemoveExecutor {
  static constexpr MessageType kType = MessageType::kRemoveExecutor;
  std::string executor_id;
  std::string reason;
};

struct Heartbeat {
  static constexpr MessageType kType = MessageType::kHeartbeat;
  std::string executor_id;  // empty when sent by the driver
  int running_tasks = 0;
  std::uint64_t sent_at_ms = 0;  // sender's wall clock, for diagnostics only
  // While decommissioning, how far it has got (decommission_progress.h writes and reads it);
  // null otherwise.
  Json decommission;
  // From an agent: what it holds (usage.h); empty from the driver and from an older agent.
  AgentMetrics metrics;
};

// Ask (agent -> driver): which peers could take this agent's blocks. Reply body:
// {"peers": [{"executor_id": "...", "block_url": "http://..."}]} (never the asker, never a
// decommissioning agent).
struct GetPeers {
  static constexpr MessageType kType = MessageType::kGetPeers;
  std::string executor_id;
};

struct Peer {
  std::string executor_id;
  std::string block_url;
};
std::vector<Peer> parsePeers(const Json& reply_body);  // throws BodyError
Json toJson(const std::vector<Peer>& peers);

// One-way (agent -> driver): blocks the sender now knows of. `added` lists blocks and where
// they live now (the sender's own new blocks, or where it migrated them); `removed` lists
// ids the sender no longer holds.
struct UpdateBlockInfo {
  static constexpr MessageType kType = MessageType::kUpdateBlockInfo;
  std::string executor_id;
  std::vector<BlockInfo> added;
  std::vector<std::string> removed;
};

// ---- JSON mapping -------------------------------------------------------------------------
// toJson never throws on valid structs. fromJson throws BodyError naming the JSON path.

Json toJson(const Hello& m);
Json toJson(const RetrieveAppConfig& m);
Json toJson(const AppConfig& m);
Json toJson(const ResourceProfile& m);
Json toJson(const RegisterExecutor& m);
Json toJson(const LaunchedExecutor& m);
Json toJson(const TaskDescription& m);
Json toJson(const LaunchTask& m);
Json toJson(const KillTask& m);
Json toJson(const StatusUpdate& m);
Json toJson(const StopExecutor& m);
Json toJson(const Shutdown& m);
Json toJson(const UpdateDelegationTokens& m);
Json toJson(const UpdateExecutorLogLevel& m);
Json toJson(const DecommissionExecutor& m);
Json toJson(const ExecutorDecommissioning& m);
Json toJson(const TaskThreadDump& m);
Json toJson(const RemoveExecutor& m);
Json toJson(const Heartbeat& m);
Json toJson(const GetPeers& m);
Json toJson(const UpdateBlockInfo& m);
Json toJson(const BlockInfo& m);
Json toJson(const Authenticate& m);
Json toJson(const ResumeExecutor& m);
Json toJson(const ResumeAccepted& m);

template <typename T>
struct Tag {};
Hello fromJson(const Json& j, Tag<Hello>);
RetrieveAppConfig fromJson(const Json& j, Tag<RetrieveAppConfig>);
AppConfig fromJson(const Json& j, Tag<AppConfig>);
ResourceProfile fromJson(const Json& j, Tag<ResourceProfile>);
RegisterExecutor fromJson(const Json& j, Tag<RegisterExecutor>);
LaunchedExecutor fromJson(const Json& j, Tag<LaunchedExecutor>);
TaskDescription fromJson(const Json& j, Tag<TaskDescription>);
LaunchTask fromJson(const Json& j, Tag<LaunchTask>);
KillTask fromJson(const Json& j, Tag<KillTask>);
StatusUpdate fromJson(const Json& j, Tag<StatusUpdate>);
StopExecutor fromJson(const Json& j, Tag<StopExecutor>);
Shutdown fromJson(const Json& j, Tag<Shutdown>);
UpdateDelegationTokens fromJson(const Json& j, Tag<UpdateDelegationTokens>);
UpdateExecutorLogLevel fromJson(const Json& j, Tag<UpdateExecutorLogLevel>);
DecommissionExecutor fromJson(const Json& j, Tag<DecommissionExecutor>);
ExecutorDecommissioning fromJson(const Json& j, Tag<ExecutorDecommissioning>);
TaskThreadDump fromJson(const Json& j, Tag<TaskThreadDump>);
RemoveExecutor fromJson(const Json& j, Tag<RemoveExecutor>);
Heartbeat fromJson(const Json& j, Tag<Heartbeat>);
GetPeers fromJson(const Json& j, Tag<GetPeers>);
UpdateBlockInfo fromJson(const Json& j, Tag<UpdateBlockInfo>);
BlockInfo fromJson(const Json& j, Tag<BlockInfo>);
Authenticate fromJson(const Json& j, Tag<Authenticate>);
ResumeExecutor fromJson(const Json& j, Tag<ResumeExecutor>);
ResumeAccepted fromJson(const Json& j, Tag<ResumeAccepted>);

// Decodes a body of type T; throws BodyError.
template <typename T>
T decodeBody(const Json& body) {
  return fromJson(body.is_null() ? Json::object() : body, Tag<T>{});
}

// Builds the envelope of a message.
template <typename M>
Envelope makeMessage(const M& message, std::uint64_t id = 0) {
  Envelope env;
  env.type = std::string(specOf(M::kType).name);
  env.id = id;
  env.body = toJson(message);
  return env;
}

}  // namespace dockhand::protocol
