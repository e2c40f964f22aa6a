#include "app/plugins_check.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "blocks/block_fetcher.h"
#include "blocks/block_server.h"
#include "blocks/block_store.h"
#include "blocks/checksum.h"
#include "core/exit_codes.h"
#include "decommission/migrate_answer.h"
#include "dockhand/protocol/messages.h"
#include "dockhand/tls/tls.h"
#include "executor/task_files.h"
#include "plugins/block_migration_plugin.h"
#include "plugins/resource_discovery_plugin.h"
#include "plugins/task_runner_plugin.h"
#include "resources/resource_discovery.h"

namespace dockhand::agent {
namespace {

using nlohmann::json;
using Millis = std::chrono::milliseconds;
namespace fs = std::filesystem;

constexpr std::size_t kScratchBlockBytes = std::size_t{64} * 1024;
constexpr std::string_view kPeerId = "plugins-check-peer";

// What one plugin's check found: a line per hook, and whether every one passed.
struct CheckReport {
  bool ok = true;
  std::vector<std::string> lines;
  void pass(std::string line) { lines.push_back(std::move(line)); }
  void fail(std::string line) {
    ok = false;
    lines.push_back("FAILED: " + std::move(line));
  }
};

std::string_view stateName(std::int32_t state) {
  switch (state) {
    case DH_TASK_RUNNING:
      return "RUNNING";
    case DH_TASK_FINISHED:
      return "FINISHED";
    case DH_TASK_FAILED:
      return "FAILED";
    case DH_TASK_KILLED:
      return "KILLED";
    case DH_TASK_LOST:
      return "LOST";
    default:
      return "an unknown state";
  }
}

// What the runners report, by task id (each runner's check launches its own id).
class TaskReports {
 public:
  struct End {
    std::int32_t state = 0;
    std::string detail;
  };

  void report(std::uint64_t task_id, std::int32_t state, std::string_view detail) {
    std::lock_guard lock(mutex_);
    if (state == DH_TASK_RUNNING) {
      running_.insert(task_id);
    } else if (ended_.count(task_id) == 0) {
      ended_.emplace(task_id, End{state, std::string(detail)});
    }
    changed_.notify_all();
  }
  // Waits until the task runs or ended; false after `bound`.
  bool waitStarted(std::uint64_t task_id, Millis bound) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(
        lock, bound, [&] { return running_.count(task_id) != 0 || ended_.count(task_id) != 0; });
  }
  std::optional<End> waitEnded(std::uint64_t task_id, Millis bound) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, bound, [&] { return ended_.count(task_id) != 0; })) {
      return std::nullopt;
    }
    return ended_.at(task_id);
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::set<std::uint64_t> running_;
  std::map<std::uint64_t, End> ended_;
};

// A directory of the check's own under the temporary directory, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "dockhand-plugins-check.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "cannot make " + pattern);
    }
    path_ = pattern;
    // A runner that runs tasks as another user lets them pass through, as the agent's tasks/.
    fs::permissions(path_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void checkDiscovery(const LoadedPlugin& plugin, const std::vector<std::string>& resources,
                    CheckReport& report) {
  ResourceDiscoveryPlugin discovery(plugin.instance);
  for (const auto& name : resources) {
    const std::string call = fmt::format("discover({})", name);
    PluginResult answer = discovery.discover(json{{"name", name}, {"amount", 1}}.dump());
    if (answer.status == DH_DECLINED) {
      report.pass(call + ": declined (not a resource it discovers)");
      continue;
    }
    if (!answer.ok()) {
      report.fail(call + ": " + answer.error);
      continue;
    }
    try {
      auto found = DiscoveryChain::parseAnswer(discovery.name(), name, answer.json);
      report.pass(fmt::format("{}: {} address(es) [{}]", call, found.addresses.size(),
                              fmt::join(found.addresses, ", ")));
    } catch (const ResourceError& e) {
      report.fail(call + ": " + e.what());
    }
  }
  if (plugin.library->descriptor().resource_discovery->describe != nullptr) {
    PluginResult described = discovery.describe();
    const json details = described.ok() ? json::parse(described.json, nullptr, false) : json();
    if (!described.ok()) {
      report.fail("describe(): " + described.error);
    } else if (!details.is_object()) {
      report.fail("describe(): not a JSON object: " + described.json.substr(0, 200));
    } else {
      report.pass("describe(): a JSON object");
    }
  }
}

void checkRunner(const LoadedPlugin& plugin, std::uint64_t task_id, const json& payload,
                 const fs::path& scratch, TaskReports& reports, Millis bound, CheckReport& report) {
  TaskRunnerPlugin runner(plugin.instance);
  const fs::path tasks = scratch / "tasks";
  const fs::path work_dir = tasks / ("task-" + std::to_string(task_id));
  std::error_code ec;
  fs::create_directories(tasks, ec);
  if (!ec) {
    fs::permissions(tasks, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                    ec);
  }
  if (!runner.makesWorkDir() && !ec) {
    fs::create_directories(work_dir / "output", ec);
    if (!ec) fs::create_directories(work_dir / "input", ec);
  }
  if (ec) {
    report.fail("cannot make the task's scratch directory: " + ec.message());
    return;
  }
  protocol::TaskDescription task;
  task.task_id = task_id;
  task.name = "dockhand-plugins-check";
  task.runner = runner.name();
  task.payload = payload;
  const std::string task_json = runnerTaskJson(task, work_dir, "plugins-check");
  auto& calls = runner.instance().calls();
  PluginResult launched =
      calls.call({"launch", task_id}, [&runner, &task_json] { return runner.launch(task_json); });
  if (!launched.ok()) {
    report.fail("launch(): " + launched.error);
    return;
  }
  // Killed once it runs (or at once, for a runner that does not say RUNNING within a second).
  (void)reports.waitStarted(task_id, Millis(1000));
  PluginResult killed = calls.call({"kill", task_id}, [&runner, task_id] {
    return runner.kill(task_id, /*interrupt=*/false, "dockhand plugins check");
  });
  if (!killed.ok() && killed.status != DH_NOT_FOUND) {
    report.fail("kill(): " + killed.error);
    return;
  }
  auto end = reports.waitEnded(task_id, bound);
  if (!end) {
    report.fail(
        fmt::format("launch() and kill(): the task was not reported ended within {} ms "
                    "(plugin_call_timeout_ms)",
                    bound.count()));
    return;
  }
  if (end->state != DH_TASK_KILLED && end->state != DH_TASK_FINISHED) {
    report.fail(fmt::format("launch() and kill(): the task ended {}: {}", stateName(end->state),
                            end->detail.substr(0, 300)));
    return;
  }
  report.pass(fmt::format("launch() and kill(): the task ended {}", stateName(end->state)));
}

// The scratch peer a migration plugin is offered: an agent block server of its own store.
struct ScratchPeer {
  ScratchPeer(const AgentConfig& config, const fs::path& dir) : store(dir) {
    BlockServerOptions options;
    options.port = 0;
    std::string host = "127.0.0.1";
    if (config.tls.enabled) {
      // The migration plugin is given the agent's TLS and refuses plain http:// peers: this one
      // serves https:// with the agent's certificate, at the name that certificate is for.
      options.tls = tls::makeContext(config.tls, tls::Role::kServer);
      options.bind_address = config.bind_address;
      host = config.hostname;
    }
    server = std::make_unique<BlockServer>(options, store, [] { return json::object(); });
    server->start();
    url = fmt::format("{}://{}:{}", config.tls.enabled ? "https" : "http", host, server->port());
  }
  ~ScratchPeer() { server->stop(); }
  ScratchPeer(const ScratchPeer&) = delete;
  ScratchPeer& operator=(const ScratchPeer&) = delete;

  BlockStore store;
  std::unique_ptr<BlockServer> server;
  std::string url;
};

void checkMigration(const AgentConfig& config, const LoadedPlugin& plugin, const fs::path& scratch,
                    Millis bound, CheckReport& report) {
  BlockMigrationPlugin migration(plugin.instance);
  const std::string id = fmt::format("task_0_dockhand-plugins-check-{}", ::getpid());
  const fs::path blocks = scratch / "blocks";
  std::error_code ec;
  fs::create_directories(blocks, ec);
  std::string bytes(kScratchBlockBytes, '\0');
  std::mt19937_64 random(std::random_device{}());
  for (auto& c : bytes) c = static_cast<char>(random());
  std::ofstream(blocks / id, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string checksum = checksumOfFile(blocks / id);
  std::optional<ScratchPeer> peer;
  try {
    peer.emplace(config, scratch / "peer");
  } catch (const std::exception& e) {
    report.fail(std::string("cannot start the scratch peer it would be offered: ") + e.what());
    return;
  }
  json request = {
      {"blocks", json::array({{{"id", id},
                               {"path", (blocks / id).string()},
                               {"size", bytes.size()},
                               {"checksum", checksum}}})},
      {"peers", protocol::toJson(std::vector<protocol::Peer>{{std::string(kPeerId), peer->url}})
                    .at("peers")}};
  PluginResult answer = migration.migrate(request.dump(), bound);
  if (!answer.ok()) {
    report.fail("migrate(): " + answer.error);
    return;
  }
  const json out = json::parse(answer.json, nullptr, false);
  if (!out.is_object()) {
    report.fail("migrate(): malformed answer: " + answer.json.substr(0, 200));
    return;
  }
  for (const auto& item : out.value("failed", json::array())) {
    if (item.is_object() && item.value("id", std::string()) == id) {
      report.fail("migrate(): the block failed: " + item.value("reason", std::string("no reason")));
      return;
    }
  }
  // Placed and checked as the agent would (migrate_answer.h), then read back where readers
  // would read it: the peer's store, the fallback store, or the external store's URL.
  const Poco::Net::Context::Ptr tls_client =
      config.tls.enabled ? tls::makeContext(config.tls, tls::Role::kClient) : nullptr;
  const protocol::BlockInfo stored{id, bytes.size(), checksum, {}, {}};
  for (const auto& item : out.value("migrated", json::array())) {
    if (!item.is_object() || item.value("id", std::string()) != id) continue;
    auto info = migratedBlock(item, stored, {std::string(kPeerId)},
                              readersCanGet(config.fallback_dir, bound, {}, tls_client));
    if (!info) {
      report.fail("migrate(): " + info.error().message);
      return;
    }
    const bool at_peer = !info->executor_id.empty();
    const bool external = !at_peer && protocol::isExternalStoreUrl(info->url);
    if (!at_peer && !external && config.fallback_dir.empty()) {
      report.fail(fmt::format(
          "migrate(): it answered the fallback store (location '{}'), but fallback_dir is not "
          "set: the check cannot read it back where readers would",
          item.value("location", std::string())));
      return;
    }
    fs::path copy = at_peer    ? peer->store.pathOf(id)
                    : external ? scratch / "read-back"
                               : fs::path(config.fallback_dir) / id;
    std::string found;
    try {
      if (external) {
        const std::atomic<bool> never{false};
        fetchBlock(protocol::InputBlock{.id = id, .url = info->url, .size = 0, .checksum = ""},
                   copy, never, bound, {}, tls_client);
      }
      found = checksumOfFile(copy);
    } catch (const std::exception& e) {
      found = e.what();
    }
    // The check's own block out of the store again, and out of where the plugin says it put it
    // (a file of the check's unique name only). An external store keeps it: no DELETE is owed.
    const fs::path location = item.value("location", std::string());
    if (!at_peer) fs::remove(copy, ec);
    if (location.is_absolute() && location.filename() == id) fs::remove(location, ec);
    const std::string where = at_peer    ? "the scratch peer " + peer->url
                              : external ? info->url
                                         : "the fallback store " + config.fallback_dir;
    if (found != checksum) {
      report.fail(fmt::format("migrate(): readers would get the block from {}: {}", where,
                              found.rfind("xxh64:", 0) == 0 ? "other bytes are there" : found));
      return;
    }
    report.pass(
        fmt::format("migrate(): one {}-byte block to {}, read back there", bytes.size(), where));
    return;
  }
  report.fail("migrate(): the answer has the block neither migrated nor failed: " +
              answer.json.substr(0, 200));
}

std::vector<std::string> resourcesToDiscover(const AgentConfig& config,
                                             const PluginCheckOptions& options) {
  if (!options.resources.empty()) return options.resources;
  std::vector<std::string> names;
  for (const auto& [name, request] : config.resources) names.push_back(name);
  if (names.empty()) names.emplace_back("gpu");
  return names;
}

}  // namespace

int checkPlugins(const AgentConfig& config, const std::vector<PluginSpec>& specs,
                 const PluginCheckOptions& options, std::ostream& out) {
  const Millis bound(config.plugin_call_timeout_ms);
  PluginHost host(pluginSearchPath(config), config.allow_insecure_plugins,
                  pluginCallSettings(config), pluginTrust(config));
  auto reports = std::make_shared<TaskReports>();
  PluginCallbacks callbacks;
  callbacks.task_status = [reports](std::uint64_t id, std::int32_t state, std::string_view detail) {
    reports->report(id, state, detail);
  };
  ScratchDir scratch;
  std::vector<LoadedPlugin> loaded =
      loadEveryPlugin(host, config, specs, /*create=*/true, callbacks);
  auto payload_for = [&options](const std::string& runner) {
    for (const std::string& key : {runner, std::string()}) {
      if (auto it = options.payloads.find(key); it != options.payloads.end()) return it->second;
    }
    return json{{"shell", "sleep 30"}};
  };
  bool all_ok = true;
  json results = json::array();
  std::uint64_t next_task_id = 1;
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const LoadedPlugin& plugin = loaded[i];
    CheckReport report;
    if (!plugin.ok()) {
      report.fail("load: " + loadFailure(plugin));
    } else {
      const std::uint32_t kinds = plugin.library->descriptor().kinds;
      // A migration entry's instance is checked as the migration plugin it is there for.
      if (!plugin.spec.migration && (kinds & DH_KIND_RESOURCE_DISCOVERY) != 0) {
        checkDiscovery(plugin, resourcesToDiscover(config, options), report);
      }
      if (!plugin.spec.migration && (kinds & DH_KIND_TASK_RUNNER) != 0) {
        checkRunner(plugin, next_task_id++, payload_for(plugin.library->name()), scratch.path(),
                    *reports, bound, report);
      }
      if (plugin.spec.migration) {
        checkMigration(config, plugin, scratch.path() / ("migration-" + std::to_string(i)), bound,
                       report);
      } else if ((kinds & DH_KIND_BLOCK_MIGRATION) != 0) {
        report.pass("migrate(): not called (not named in decommission.migration)");
      }
    }
    all_ok = all_ok && report.ok;
    const std::string name = plugin.library ? plugin.library->name() : plugin.spec.target;
    results.push_back({{"name", name},
                       {"origin", plugin.spec.origin},
                       {"ok", report.ok},
                       {"checks", report.lines}});
    if (!options.as_json) {
      out << fmt::format("{:<16} {}  from {}\n", name, report.ok ? "OK    " : "FAILED",
                         plugin.spec.origin);
      for (const auto& line : report.lines) out << "    " << line << "\n";
    }
  }
  if (options.as_json) {
    out << json{{"ok", all_ok}, {"plugins", results}}.dump(2) << "\n";
  } else if (loaded.empty()) {
    out << "no plugins configured\n";
  }
  return toInt(all_ok ? ExitCode::kSuccess : ExitCode::kPluginError);
}

}  // namespace dockhand::agent
