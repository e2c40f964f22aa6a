// Logs served by real agents (docs/operations.md, "Task logs"): a task's stdout and stderr at
// the URLs its StatusUpdate carries, in part (Range, start/length), with clear errors for bad
// paths and ranges and for a reclaimed directory; the agent's own output at the URLs it
// registered; the cluster secret's signature required when the cluster authenticates; and
// the real driver's report naming a failed task's stdout URL, with the agent logging JSON
// lines (docs/operations.md, "Structured logs") that all parse and name the task.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockhand/protocol/auth.h"
#include "dockhand/protocol/messages.h"
#include "support/agent_command.h"
#include "support/fake_driver.h"
#include "support/http_client.h"
#include "support/process.h"

namespace dockhand::testing {
namespace {

namespace fs = std::filesystem;
namespace proto = dockhand::protocol;
using nlohmann::json;
using std::chrono_literals::operator""s;
using ::testing::HasSubstr;

constexpr const char* kSecret = "s3cr3t-f0r-the-task-logs-test-4c2";

proto::Envelope launch(std::uint64_t task_id, const std::string& shell) {
  proto::LaunchTask msg;
  msg.task.task_id = task_id;
  msg.task.name = "t" + std::to_string(task_id);
  msg.task.payload = {{"shell", shell}};
  return proto::makeMessage(msg);
}

// The path and query of `url` ("http://h:p/x?y" -> "/x?y").
std::string pathOf(const std::string& url) {
  const auto scheme = url.find("://");
  const auto slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return slash == std::string::npos ? "/" : url.substr(slash);
}

class TaskLogsTest : public ::testing::Test {
 protected:
  fs::path agentConfig(const json& extra = json::object()) {
    json config = {{"plugins", {{{"name", "process"}}}},
                   {"plugin_manifest_dir", (dir.path() / "no-manifests").string()}};
    config.update(extra);
    fs::path path = dir.path() / "agent.json";
    writeFile(path, config.dump(2));
    return path;
  }
  std::unique_ptr<ChildProcess> startAgent(const FakeDriver& driver, const fs::path& config,
                                           const std::vector<std::string>& extra = {}) {
    const AgentCommand command{.config = config,
                               .driver_url = driver.url(),
                               .executor_id = "logs-1",
                               .app_id = "task-logs",
                               .work_dir = dir.path() / "work",
                               .extra = extra};
    return std::make_unique<ChildProcess>(command.argv(), (dir.path() / "agent.log").string());
  }
  // Runs `shell` as task `task_id` to its end; returns its final status update.
  static std::optional<proto::StatusUpdate> run(FakeDriver& driver, std::uint64_t task_id,
                                                const std::string& shell) {
    if (!driver.send(launch(task_id, shell))) return std::nullopt;
    auto frame = driver.waitFor(
        [&](const proto::Envelope& e) {
          if (e.type != "StatusUpdate") return false;
          auto update = proto::decodeBody<proto::StatusUpdate>(e.body);
          return update.task_id == task_id && proto::isTerminal(update.state);
        },
        20s);
    if (!frame) return std::nullopt;
    return proto::decodeBody<proto::StatusUpdate>(frame->body);
  }

  TempDir dir;
};

TEST_F(TaskLogsTest, ServesATasksOutputAtTheUrlsOfItsStatusUpdate) {
  FakeDriver driver;
  auto agent = startAgent(driver, agentConfig());
  ASSERT_TRUE(driver.waitForRegistration(20s)) << agent->output();
  auto done = run(driver, 1, "printf 'hello\\nworld\\n'; echo oops >&2");
  ASSERT_TRUE(done.has_value()) << agent->output();
  ASSERT_EQ(done->state, proto::TaskState::kFinished) << done->reason << agent->output();
  const std::string base = driver.agentBlockUrl();
  EXPECT_EQ(done->log_urls.at("stdout"), base + "/v1/tasks/1/logs/stdout");
  const std::string out = done->log_urls.at("stdout");

  HttpReply whole = httpGet(out);
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.body, "hello\nworld\n");
  EXPECT_EQ(whole.headers["X-Dockhand-Log-Size"], "12");
  EXPECT_EQ(httpGet(done->log_urls.at("stderr")).body, "oops\n");

  HttpReply range = httpRequest("GET", out, {{"Range", "bytes=0-4"}});
  EXPECT_EQ(range.status, 206);
  EXPECT_EQ(range.body, "hello");
  EXPECT_EQ(range.headers["Content-Range"], "bytes 0-4/12");
  EXPECT_EQ(httpGet(out + "?start=6&length=5").body, "world");
  EXPECT_EQ(httpGet(out + "?start=-6").body, "world\n");
  EXPECT_EQ(httpGet(out + "?start=12").body, "");  // nothing new yet

  HttpReply past = httpGet(out + "?start=13");
  EXPECT_EQ(past.status, 416);
  EXPECT_THAT(past.body, HasSubstr("beyond the end"));
  EXPECT_EQ(httpRequest("GET", out, {{"Range", "bytes=20-"}}).status, 416);
  HttpReply bad = httpGet(out + "?start=abc");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("start must be"));
  EXPECT_EQ(httpRequest("GET", out + "?start=1", {{"Range", "bytes=0-1"}}).status, 400);
  for (const char* path : {"/v1/tasks/../logs/stdout", "/v1/tasks/1/logs/..%2f..%2fetc%2fpasswd",
                           "/v1/tasks/1/logs/../../../etc/passwd", "/v1/logs/agent/../../x"}) {
    HttpReply escape = httpGet(base + path);
    EXPECT_EQ(escape.status, 400) << path << ": " << escape.body;
  }
  HttpReply unknown = httpGet(base + "/v1/tasks/999/logs/stdout");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.body, HasSubstr("unknown task 999"));
  HttpReply stream = httpGet(base + "/v1/tasks/1/logs/stdlog");
  EXPECT_EQ(stream.status, 404);
  EXPECT_THAT(stream.body, HasSubstr("no such stream"));

  // A task that makes its stdout a link to another file gets nothing through it.
  auto linked = run(driver, 2,
                    "cd \"$DOCKHAND_OUTPUT_DIR/..\" && rm -f stdout && ln -s /etc/hostname stdout");
  ASSERT_TRUE(linked.has_value()) << agent->output();
  // Nor through its result: the process runner does not follow the link either.
  EXPECT_EQ(linked->result.value("stdout", "?"), "") << linked->result.dump();
  HttpReply link = httpGet(base + "/v1/tasks/2/logs/stdout");
  EXPECT_EQ(link.status, 404) << link.body;
  EXPECT_THAT(link.body, HasSubstr("not a regular file"));

  // The agent's own output, at the URLs it registered (its stderr is a file here).
  std::optional<proto::RegisterExecutor> reg;
  for (const auto& frame : driver.history()) {
    if (frame.type == "RegisterExecutor")
      reg = proto::decodeBody<proto::RegisterExecutor>(frame.body);
  }
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->log_urls.at("stderr"), base + "/v1/logs/agent/stderr");
  HttpReply own = httpGet(reg->log_urls.at("stderr") + "?start=0");
  EXPECT_EQ(own.status, 200);
  EXPECT_THAT(own.body, HasSubstr("block server listening"));
  EXPECT_EQ(httpGet(base + "/v1/logs/agent/journal").status, 404);
  EXPECT_TRUE(agent->running());
}

TEST_F(TaskLogsTest, AReclaimedDirectoryAnswers404SayingSo) {
  FakeDriver driver;
  auto agent = startAgent(driver, agentConfig({{"keep_task_dirs", 1}}));
  ASSERT_TRUE(driver.waitForRegistration(20s)) << agent->output();
  auto first = run(driver, 1, "echo first");
  ASSERT_TRUE(first.has_value()) << agent->output();
  EXPECT_EQ(httpGet(first->log_urls.at("stdout")).body, "first\n");
  ASSERT_TRUE(run(driver, 2, "echo second").has_value()) << agent->output();
  HttpReply gone;
  EXPECT_TRUE(waitUntil(
      [&] {
        gone = httpGet(first->log_urls.at("stdout"));
        return gone.status == 404;
      },
      10s))
      << gone.status << " " << gone.body;
  EXPECT_THAT(gone.body, HasSubstr("reclaimed"));
  EXPECT_THAT(gone.body, HasSubstr("keep_task_dirs"));
  EXPECT_EQ(httpGet(driver.agentBlockUrl() + "/v1/tasks/2/logs/stdout").body, "second\n");
}

// A task that wrote nothing hands its directory to the next task (docs/operations.md, "Task
// directories"); its logs still answer, empty, and never with the next task's output.
TEST_F(TaskLogsTest, ATaskThatWroteNothingHasEmptyLogsAfterItsDirectoryMovedOn) {
  FakeDriver driver;
  auto agent = startAgent(driver, agentConfig());
  ASSERT_TRUE(driver.waitForRegistration(20s)) << agent->output();
  auto quiet = run(driver, 1, "true");
  ASSERT_TRUE(quiet.has_value()) << agent->output();
  const std::string out = quiet->log_urls.at("stdout");
  auto expect_empty = [&](const std::string& when) {
    HttpReply reply = httpGet(out);
    EXPECT_EQ(reply.status, 200) << when << ": " << reply.body;
    EXPECT_EQ(reply.body, "") << when;
    EXPECT_EQ(reply.headers["X-Dockhand-Log-Size"], "0") << when;
    EXPECT_EQ(httpRequest("GET", out, {{"Range", "bytes=0-0"}}).status, 416) << when;
  };
  expect_empty("before the next task");
  auto next = run(driver, 2, "echo second");
  ASSERT_TRUE(next.has_value()) << agent->output();
  EXPECT_FALSE(fs::exists(dir.path() / "work" / "tasks" / "task-1"));
  expect_empty("after the next task took its directory");
  EXPECT_EQ(httpGet(quiet->log_urls.at("stderr")).body, "");
  EXPECT_EQ(httpGet(next->log_urls.at("stdout")).body, "second\n");

  // A task whose only trace is its outputs, blocks now, left nothing either.
  auto mapper = run(driver, 3, "echo x > \"$DOCKHAND_OUTPUT_DIR/rdd_9_0\"");
  ASSERT_TRUE(mapper.has_value()) << agent->output();
  ASSERT_EQ(mapper->state, proto::TaskState::kFinished) << mapper->reason;
  ASSERT_TRUE(run(driver, 4, "true").has_value()) << agent->output();
  EXPECT_FALSE(fs::exists(dir.path() / "work" / "tasks" / "task-3"));
  EXPECT_TRUE(fs::exists(dir.path() / "work" / "tasks" / "task-2"));
  EXPECT_EQ(httpGet(driver.agentBlockUrl() + "/blocks/rdd_9_0").body, "x\n");
  EXPECT_EQ(httpGet(mapper->log_urls.at("stdout")).status, 200);
}

TEST_F(TaskLogsTest, LogsNeedTheClustersSignatureWhenItAuthenticates) {
  const fs::path secret = dir.path() / "secret";
  writeFile(secret, std::string(kSecret) + "\n");
  ::chmod(secret.c_str(), 0600);
  FakeDriver::Options options;
  options.secret = kSecret;
  FakeDriver driver(options);
  auto agent = startAgent(driver, agentConfig(), {"--auth-secret-file", secret.string()});
  ASSERT_TRUE(driver.waitForRegistration(20s)) << agent->output();
  auto done = run(driver, 1, "echo signed");
  ASSERT_TRUE(done.has_value()) << agent->output();
  const std::string url = done->log_urls.at("stdout");

  HttpReply unsigned_reply = httpGet(url);
  EXPECT_EQ(unsigned_reply.status, 401);
  EXPECT_THAT(unsigned_reply.body, HasSubstr("unauthorized"));
  EXPECT_EQ(httpGet(driver.agentBlockUrl() + "/v1/logs/agent/stderr").status, 401);
  EXPECT_EQ(httpGet(driver.agentBlockUrl() + "/v1/tasks/../logs/x").status, 401);

  const auto sign = protocol::auth::makeRequestSigner(protocol::auth::ClusterSecret(kSecret));
  const std::string path = pathOf(url);
  HttpReply signed_reply = httpRequest("GET", url, {{"Authorization", sign("GET", path, "")}});
  EXPECT_EQ(signed_reply.status, 200) << signed_reply.body;
  EXPECT_EQ(signed_reply.body, "signed\n");
  // /v1/status stays open.
  EXPECT_EQ(httpGet(driver.agentBlockUrl() + "/v1/status").status, 200);

  // What a person runs: `dockhand-driver fetch URL` signs with the secret it is given.
  ChildProcess fetch(
      {driverBinary(), "fetch", url + "?start=-7", "--auth-secret-file", secret.string()},
      (dir.path() / "fetch.out").string());
  EXPECT_EQ(fetch.waitExit(30s), 0) << fetch.output();
  EXPECT_EQ(fetch.output(), "signed\n");
  // Without it: the server's refusal and what to do about it, exit 1.
  ChildProcess refused({driverBinary(), "fetch", url}, (dir.path() / "refused.out").string());
  EXPECT_EQ(refused.waitExit(30s), 1) << refused.output();
  EXPECT_THAT(refused.output(), HasSubstr("HTTP 401"));
  EXPECT_THAT(refused.output(), HasSubstr("give --auth-secret-file"));
  // Not a URL of the cluster at all.
  ChildProcess bad({driverBinary(), "fetch", "ftp://host/x"}, (dir.path() / "bad.out").string());
  EXPECT_EQ(bad.waitExit(30s), 64) << bad.output();
}

// `run --log-format json`: the local agents log JSON lines too.
TEST_F(TaskLogsTest, RunGivesItsLocalAgentsItsLogFormat) {
  ChildProcess run(
      {driverBinary(), "run",
       (fs::path(DOCKHAND_SOURCE_DIR) / "examples" / "wordcount" / "job.json").string(),
       "--local-agents", "1", "--timeout", "60", "--log-format", "json", "--keep-work-dirs"},
      (dir.path() / "run.log").string());
  ASSERT_EQ(run.waitExit(90s), 0) << run.output();
  const std::string marker = "work dirs kept in ";
  const auto at = run.output().find(marker);
  ASSERT_NE(at, std::string::npos) << run.output();
  std::string kept = run.output().substr(at + marker.size());
  kept = kept.substr(0, kept.find('\n'));
  const std::string log = readFile(fs::path(kept) / "agent-1.log");
  int lines = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    ++lines;
    const json parsed = json::parse(line, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << "not JSON: " << line;
    EXPECT_EQ(parsed.value("executor_id", ""), "agent-1") << line;
  }
  EXPECT_GT(lines, 0) << log;
  fs::remove_all(kept);
}

// The real driver: a failed task's line in the report names its stdout URL, which serves what
// the task printed. The agent logs JSON lines: every line parses, and the task's lines carry
// its id.
TEST_F(TaskLogsTest, TheDriversReportLinksAFailedTasksStdout) {
  const fs::path job = dir.path() / "job.json";
  writeFile(job, json{{"name", "logs"},
                      {"max_attempts", 1},
                      {"tasks", {{{"name", "breaks"}, {"shell", "echo partial-output; exit 3"}}}}}
                     .dump());
  const fs::path port_file = dir.path() / "port";
  ChildProcess driver(
      {driverBinary(), "run", job.string(), "--local-agents", "0", "--min-agents", "1", "--timeout",
       "60", "--linger", "60", "--listen", "127.0.0.1:0", "--port-file", port_file.string(),
       "--log-format", "json", "--log-level", "debug"},
      (dir.path() / "driver.log").string());
  ASSERT_TRUE(waitUntil([&] { return fs::exists(port_file); }, 10s)) << driver.output();
  const int port = std::stoi(readFile(port_file));
  const AgentCommand command{.config = agentConfig({{"log_format", "json"}}),
                             .driver_url = "ws://127.0.0.1:" + std::to_string(port) + "/",
                             .executor_id = "json-1",
                             .app_id = "task-logs",
                             .work_dir = dir.path() / "work",
                             .extra = {"--log-level", "debug"}};
  ChildProcess agent(command.argv(), (dir.path() / "agent.log").string());
  ASSERT_TRUE(
      waitUntil([&] { return driver.output().find("job logs FAILED") != std::string::npos; }, 40s))
      << driver.output() << agent.output();
  std::smatch m;
  const std::string report = driver.output();
  ASSERT_TRUE(std::regex_search(report, m, std::regex(R"(stdout log: (\S+))"))) << report;
  EXPECT_EQ(httpGet(m[1]).body, "partial-output\n") << m[1];

  bool task_line = false;
  std::istringstream lines(agent.output());
  for (std::string line; std::getline(lines, line);) {
    const json parsed = json::parse(line, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << "not JSON: " << line;
    for (const char* key : {"timestamp", "level", "logger", "message"}) {
      EXPECT_TRUE(parsed.contains(key)) << key << " missing in " << line;
    }
    EXPECT_EQ(parsed.value("executor_id", ""), "json-1") << line;
    if (parsed.contains("task_id")) task_line = true;
  }
  EXPECT_TRUE(task_line) << agent.output();
  // The driver's lines are JSON too (its report is on stdout, its log on stderr).
  bool driver_task_line = false;
  std::istringstream driver_lines(driver.output());
  for (std::string line; std::getline(driver_lines, line);) {
    if (line.rfind("{\"timestamp\"", 0) != 0) continue;
    const json parsed = json::parse(line, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << line;
    if (parsed.contains("task_id") && parsed.value("executor_id", "") == "json-1") {
      driver_task_line = true;
    }
  }
  EXPECT_TRUE(driver_task_line) << driver.output();
  driver.signal(SIGTERM);
  EXPECT_TRUE(driver.waitExit(30s).has_value());
}

}  // namespace
}  // namespace dockhand::testing
