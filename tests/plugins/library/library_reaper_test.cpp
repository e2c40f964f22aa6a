// The library runner's reaper: a task function that ignores its kill. The real plugin, loaded
// and checked by the agent's PluginLibrary, is driven here through a dh_host of the test's own
// that records what the agent would get, unrecoverable() and log lines included.
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "library_test_support.h"
#include "plugins/plugin_library.h"
#include "status_recorder.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using dockhand::testing::eventually;
using dockhand::testing::installJobLibrary;
using dockhand::testing::libraryTask;
using dockhand::testing::StatusRecorder;
using dockhand::testing::taskDir;
using dockhand::testing::TempDir;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A dh_host that records statuses, log lines and unrecoverable() reasons.
class RecordingHost {
 public:
  explicit RecordingHost(std::string config) : config_(std::move(config)) {
    table_.struct_size = sizeof(dh_host);
    table_.ctx = this;
    table_.log = [](void* ctx, std::int32_t /*level*/, const char* message) {
      auto* self = static_cast<RecordingHost*>(ctx);
      std::lock_guard lock(self->mutex_);
      self->logs_.emplace_back(message);
    };
    table_.task_status = [](void* ctx, std::uint64_t id, std::int32_t state, const char* detail) {
      static_cast<RecordingHost*>(ctx)->recorder.record(id, state, detail ? detail : "");
    };
    table_.config = [](void* ctx) { return static_cast<RecordingHost*>(ctx)->config_.c_str(); };
    table_.unrecoverable = [](void* ctx, const char* reason) {
      auto* self = static_cast<RecordingHost*>(ctx);
      std::lock_guard lock(self->mutex_);
      self->unrecoverable_.emplace_back(reason);
    };
  }
  const dh_host* table() const { return &table_; }
  std::vector<std::string> unrecoverable() {
    std::lock_guard lock(mutex_);
    return unrecoverable_;
  }
  bool logged(const std::string& part) {
    std::lock_guard lock(mutex_);
    for (const auto& line : logs_) {
      if (line.find(part) != std::string::npos) return true;
    }
    return false;
  }

  StatusRecorder recorder;

 private:
  dh_host table_{};
  std::string config_;
  std::mutex mutex_;
  std::vector<std::string> logs_;
  std::vector<std::string> unrecoverable_;
};

class LibraryReaperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    library_path_ = installJobLibrary(libs_.path(), DOCKHAND_TEST_JOBS, "libtest-jobs.so");
    plugin_ =
        PluginLibrary::open(std::filesystem::path(DOCKHAND_PLUGIN_DIR) / "dockhand-library.so");
  }
  void TearDown() override { destroy(); }

  void create(json config) {
    config["libraries"]["test"] = library_path_;
    host_ = std::make_unique<RecordingHost>(config.dump());
    const dh_plugin_descriptor& descriptor = plugin_->descriptor();
    ASSERT_EQ(descriptor.create(host_->table(), config.dump().c_str(), &instance_), DH_OK)
        << descriptor.last_error(instance_);
  }
  void destroy() {
    if (instance_ != nullptr) plugin_->descriptor().destroy(instance_);
    instance_ = nullptr;
  }
  dh_status launch(std::uint64_t id, const json& payload) {
    std::string task = libraryTask(tasks_.path(), id, payload);
    return plugin_->descriptor().task_runner->launch(instance_, task.c_str());
  }
  dh_status kill(std::uint64_t id, const char* reason) {
    return plugin_->descriptor().task_runner->kill(instance_, id, 0, reason);
  }
  bool ready(std::uint64_t id) {
    return eventually(
        [&] { return std::filesystem::exists(taskDir(tasks_.path(), id) / "output" / "ready"); });
  }

  TempDir libs_;
  TempDir tasks_;
  std::string library_path_;
  std::shared_ptr<const PluginLibrary> plugin_;
  std::unique_ptr<RecordingHost> host_;
  dh_plugin* instance_ = nullptr;
};

TEST_F(LibraryReaperTest, IgnoredKillIsReportedAfterTheTimeoutAndTheAgentAskedToEnd) {
  create({{"kill_timeout_ms", 200}, {"exit_on_unkillable", true}});
  ASSERT_EQ(launch(1, {{"library", "test"}, {"function", "ignoreKill"}, {"args", {{"ms", 3000}}}}),
            DH_OK);
  ASSERT_TRUE(ready(1));
  ASSERT_EQ(kill(1, "stage cancelled"), DH_OK);
  auto end = host_->recorder.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_EQ(end->detail.at("reason"),
            "task 1 (library test, function ignoreKill) did not return within kill_timeout_ms "
            "(200 ms) of its kill (stage cancelled); its thread was left running");
  ASSERT_TRUE(eventually([&] { return !host_->unrecoverable().empty(); }));
  EXPECT_THAT(host_->unrecoverable(),
              ElementsAre("task 1 (library test, function ignoreKill) did not return within "
                          "kill_timeout_ms (200 ms) of its kill"));
  // destroy() does not wait for the thread: it is left running, and this test ends while it
  // still sleeps.
}

TEST_F(LibraryReaperTest, LateReturnAfterTheTimeoutSendsNothingMore) {
  create({{"kill_timeout_ms", 100}});
  ASSERT_EQ(launch(1, {{"library", "test"}, {"function", "ignoreKill"}, {"args", {{"ms", 1500}}}}),
            DH_OK);
  ASSERT_TRUE(ready(1));
  ASSERT_EQ(kill(1, "k"), DH_OK);
  auto end = host_->recorder.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_THAT(end->detail.at("reason").get<std::string>(), HasSubstr("did not return"));
  ASSERT_TRUE(eventually([&] { return host_->logged("after it was reported KILLED"); }));
  EXPECT_EQ(host_->recorder.reports(1).size(), 2u);
  EXPECT_TRUE(host_->unrecoverable().empty());
  // The thread is free again: the next task runs.
  ASSERT_EQ(launch(2, {{"library", "test"}, {"function", "echoArgs"}}), DH_OK);
  auto next = host_->recorder.waitTerminal(2);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->state, DH_TASK_FINISHED);
}

TEST_F(LibraryReaperTest, TaskLogLinesAreTaggedWithTheTask) {
  create(json::object());
  ASSERT_EQ(launch(5, {{"library", "test"}, {"function", "logLine"}}), DH_OK);
  ASSERT_TRUE(host_->recorder.waitTerminal(5));
  EXPECT_TRUE(host_->logged("task 5: hello from the task"));
}

}  // namespace
}  // namespace dockhand::agent
