// The plugin-call policy through the real host, with plugins written here (in-process
// descriptors, PluginLibrary::fromDescriptor: no file, no dlopen): a create() that never
// returns, a stuck allocate(), cancel() reaching a migrate() in progress, and the order of one
// instance's calls. Hooks that "hang" wait on a gate the test opens before it ends.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fixture_common.h"
#include "plugins/plugin_host.h"

namespace dockhand::agent {
namespace {

using namespace std::chrono_literals;

// What the hooks below do, set by each test before it creates its instance.
struct Script {
  std::mutex mutex;
  std::condition_variable changed;
  bool open = false;       // the gate hanging hooks wait on
  bool cancelled = false;  // cancel() was called
  bool hang_create = false;
  bool hang_allocate = false;
  std::vector<std::string> calls;  // hook names, in the order they ran
  std::vector<std::thread::id> threads;

  void note(const char* hook) {
    std::lock_guard lock(mutex);
    calls.emplace_back(hook);
    threads.push_back(std::this_thread::get_id());
  }
  void waitForGate() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return open; });
  }
  void openGate() {
    std::lock_guard lock(mutex);
    open = true;
    changed.notify_all();
  }
};
Script* gScript = nullptr;
int gInstance = 0;  // what create() hands out: the plugin keeps no state of its own

dh_status create(const dh_host*, const char*, dh_plugin** out) {
  gScript->note("create");
  if (gScript->hang_create) gScript->waitForGate();
  *out = reinterpret_cast<dh_plugin*>(&gInstance);
  return DH_OK;
}

dh_status discover(dh_plugin*, const char*, const char** out) {
  gScript->note("discover");
  *out = R"({"name": "widget", "addresses": ["0"]})";
  return DH_OK;
}
dh_status allocate(dh_plugin*, const char*) {
  gScript->note("allocate");
  if (gScript->hang_allocate) gScript->waitForGate();
  return DH_OK;
}
dh_status release(dh_plugin*, const char*) {
  gScript->note("release");
  return DH_OK;
}
dh_status migrate(dh_plugin*, const char*, const char** out) {
  gScript->note("migrate");
  std::unique_lock lock(gScript->mutex);
  gScript->changed.wait(lock, [] { return gScript->cancelled || gScript->open; });
  *out = R"({"migrated": [], "failed": []})";
  return DH_OK;
}
void cancel(dh_plugin*) {
  std::lock_guard lock(gScript->mutex);
  gScript->cancelled = true;
  gScript->changed.notify_all();
}

dh_resource_discovery_vtable gDiscovery{sizeof(dh_resource_discovery_vtable), &discover, &allocate,
                                        &release, nullptr};
dh_block_migration_vtable gMigration{sizeof(dh_block_migration_vtable), &migrate, &cancel};

// One plugin of two kinds, on the fixture plugins' descriptor builder.
dh_plugin_descriptor descriptor(const char* name) {
  dh_plugin_descriptor d = fixture::runnerDescriptor(name);
  d.kinds = DH_KIND_RESOURCE_DISCOVERY | DH_KIND_BLOCK_MIGRATION;
  d.task_runner = nullptr;
  d.create = &create;
  d.resource_discovery = &gDiscovery;
  d.block_migration = &gMigration;
  return d;
}

class InProcessPluginTest : public ::testing::Test {
 protected:
  InProcessPluginTest() : script_(nextScript()) { gScript = &script_; }
  ~InProcessPluginTest() override {
    script_.openGate();  // nothing stays blocked in a hook once the test is done
  }
  // A hook released by the gate may still be on its way out when the test ends: each test's
  // script lives until the process exits.
  static Script& nextScript() {
    static Script scripts[16];
    static int next = 0;
    return scripts[next++ % 16];
  }
  PluginHost& hostWith(const dh_plugin_descriptor& d) {
    host_.add(PluginLibrary::fromDescriptor(&d));
    return host_;
  }

  Script& script_;
  PluginHost host_{{}, /*allow_insecure=*/false, PluginCallSettings{200ms}};
};

TEST_F(InProcessPluginTest, DescriptorIsCheckedLikeALoadedOne) {
  dh_plugin_descriptor d = descriptor("bad");
  d.abi_major = DH_ABI_MAJOR + 1;
  try {
    PluginLibrary::fromDescriptor(&d);
    FAIL() << "a descriptor of another ABI major was taken";
  } catch (const PluginLoadError& e) {
    EXPECT_EQ(std::string(e.what()), "plugin '(in process)': ABI major " +
                                         std::to_string(DH_ABI_MAJOR + 1) + ", host supports " +
                                         std::to_string(DH_ABI_MAJOR));
  }
}

TEST_F(InProcessPluginTest, EveryCallOfAnInstanceRunsInOrderOnOneThreadOfItsOwn) {
  const dh_plugin_descriptor d = descriptor("widgets");
  auto plugin = hostWith(d).createResourceDiscovery("widgets", "{}");
  ASSERT_TRUE(plugin->discover(R"({"name": "widget", "amount": 1})").ok());
  ASSERT_TRUE(plugin->allocate(R"({"task_id": 1})").ok());
  ASSERT_TRUE(plugin->release(R"({"task_id": 1})").ok());
  std::lock_guard lock(script_.mutex);
  EXPECT_EQ(script_.calls, (std::vector<std::string>{"create", "discover", "allocate", "release"}));
  for (const auto& id : script_.threads) {
    EXPECT_EQ(id, script_.threads.front());
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST_F(InProcessPluginTest, CreateThatNeverReturnsFailsTheLoadAndTheInstanceIsLeftBehind) {
  script_.hang_create = true;
  const dh_plugin_descriptor d = descriptor("slow-create");
  const auto left_before = PluginInstance::leftBehind().size();
  try {
    hostWith(d).create("slow-create", "{}");
    FAIL() << "a create() that never returned gave an instance";
  } catch (const PluginLoadError& e) {
    EXPECT_EQ(std::string(e.what()),
              "plugin 'slow-create' ((in process)): create failed: create() did not return "
              "within 200 ms (plugin_call_timeout_ms); the call is abandoned");
  }
  // Not destroyed under the running create(): kept, and named.
  const auto left = PluginInstance::leftBehind();
  ASSERT_EQ(left.size(), left_before + 1);
  EXPECT_NE(left.back().find("slow-create"), std::string::npos) << left.back();
}

TEST_F(InProcessPluginTest, StuckAllocateFailsAtOnceFromThenOnWithoutCallingThePlugin) {
  const dh_plugin_descriptor d = descriptor("hangs");
  auto plugin = hostWith(d).createResourceDiscovery("hangs", "{}");
  script_.hang_allocate = true;
  PluginResult first = plugin->allocate(R"({"task_id": 1})");
  EXPECT_EQ(first.error,
            "allocate() did not return within 200 ms (plugin_call_timeout_ms); the call is "
            "abandoned");
  PluginResult second = plugin->release(R"({"task_id": 1})");
  EXPECT_EQ(second.error,
            "plugin 'hangs' is stuck: allocate() did not return within 200 ms "
            "(plugin_call_timeout_ms); restart the agent to use it again");
  std::lock_guard lock(script_.mutex);
  EXPECT_EQ(script_.calls, (std::vector<std::string>{"create", "allocate"}))
      << "release() never reached the plugin";
}

TEST_F(InProcessPluginTest, CancelReachesAMigrateInProgressAndMigrateIsNotBounded) {
  const dh_plugin_descriptor d = descriptor("mover");
  auto plugin = hostWith(d).createBlockMigration("mover", "{}", {});
  PluginResult answer;
  std::thread pass([&] { answer = plugin->migrate(R"({"blocks": [], "peers": []})"); });
  // Well past plugin_call_timeout_ms (200 ms): a migrate() takes as long as its blocks need.
  std::this_thread::sleep_for(400ms);
  plugin->cancel();  // not queued behind the migrate() it must reach
  pass.join();
  EXPECT_TRUE(answer.ok()) << answer.error;
  EXPECT_EQ(answer.json, R"({"migrated": [], "failed": []})");
}

}  // namespace
}  // namespace dockhand::agent
