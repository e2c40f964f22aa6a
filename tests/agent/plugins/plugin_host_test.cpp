// The plugin host against real libraries: the built-in `process` plugin and one tiny broken
// fixture plugin per refusal (tests/fixtures/plugins).
#include <dlfcn.h>
#include <stdlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "plugins/plugin_host.h"
#include "status_recorder.h"
#include "test_processes.h"

namespace dockhand::agent {
namespace {

using dockhand::testing::StatusRecorder;
using ::testing::HasSubstr;

const std::filesystem::path kPluginDir = DOCKHAND_PLUGIN_DIR;
const std::filesystem::path kFixtureDir = DOCKHAND_FIXTURE_PLUGIN_DIR;

std::string fixture(const std::string& name) {
  return (kFixtureDir / ("dockhand-fixture-" + name + ".so")).string();
}

// Captures the log lines of everything (the plugin loggers clone the default logger).
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() {
    spdlog::set_default_logger(previous_);
    for (const char* name : {"plugin.slow-launch", "plugin.older-minor", "plugin.every-call-fails"})
      spdlog::drop(name);
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

// A private copy of a fixture in a fresh directory, to change its permissions.
class FixtureCopy {
 public:
  explicit FixtureCopy(const std::string& name) {
    char pattern[] = "/tmp/dockhand-perm-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    std::filesystem::permissions(dir_, std::filesystem::perms(0755));
    file_ = dir_ / ("dockhand-fixture-" + name + ".so");
    std::filesystem::copy_file(fixture(name), file_);
    std::filesystem::permissions(file_, std::filesystem::perms(0755));
  }
  ~FixtureCopy() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path file_;
};

// The message PluginHost::load() refuses `name_or_path` with ("" when it loads).
std::string refusal(PluginHost& host, const std::string& name_or_path) {
  try {
    host.load(name_or_path);
  } catch (const PluginLoadError& e) {
    return e.what();
  }
  return "";
}

std::string createRefusal(PluginHost& host, const std::string& name_or_path,
                          const std::string& config = "{}") {
  try {
    host.create(name_or_path, config);
  } catch (const PluginLoadError& e) {
    return e.what();
  }
  return "";
}

TEST(PluginHostTest, FindsPluginByNameInFirstDirectoryThatHasIt) {
  PluginHost host({kFixtureDir, kPluginDir});
  auto library = host.load("process");
  EXPECT_EQ(library->name(), "process");
  EXPECT_EQ(library->path(), kPluginDir / "dockhand-process.so");
  EXPECT_FALSE(library->version().empty());
  EXPECT_TRUE(library->implements(DH_KIND_TASK_RUNNER));
  EXPECT_EQ(host.load("process"), library) << "a library is loaded once";
  EXPECT_EQ(host.load((kPluginDir / "dockhand-process.so").string()), library);
}

TEST(PluginHostTest, UnknownNameListsTheDirectoriesSearched) {
  PluginHost host({kFixtureDir, kPluginDir});
  EXPECT_EQ(refusal(host, "nope"), "plugin 'nope': no dockhand-nope.so in " + kFixtureDir.string() +
                                       ", " + kPluginDir.string());
  EXPECT_EQ(refusal(host, "/nonexistent/dockhand-x.so"),
            "plugin '/nonexistent/dockhand-x.so': no such file");
}

TEST(PluginHostTest, RefusesTextFile) {
  PluginHost host({});
  EXPECT_EQ(refusal(host, fixture("not-a-library")),
            "plugin '" + fixture("not-a-library") + "': not a shared library (no ELF header)");
}

TEST(PluginHostTest, RefusesLibraryWithoutEntrySymbol) {
  PluginHost host({});
  EXPECT_EQ(refusal(host, fixture("missing-entry")),
            "plugin '" + fixture("missing-entry") +
                "': missing entry symbol dh_plugin_entry (not a Dockhand plugin?)");
}

TEST(PluginHostTest, RefusesOtherAbiMajor) {
  PluginHost host({});
  EXPECT_EQ(refusal(host, fixture("wrong-major")),
            "plugin '" + fixture("wrong-major") + "': ABI major " +
                std::to_string(DH_ABI_MAJOR + 1) + ", host supports " +
                std::to_string(DH_ABI_MAJOR));
}

TEST(PluginHostTest, RefusesNewerAbiMinor) {
  PluginHost host({});
  EXPECT_THAT(refusal(host, fixture("newer-minor")),
              HasSubstr("': needs ABI 1." + std::to_string(DH_ABI_MINOR + 1) +
                        ", host supports up to 1." + std::to_string(DH_ABI_MINOR)));
}

TEST(PluginHostTest, RefusesRunnerWithoutRequiredHook) {
  PluginHost host({});
  EXPECT_EQ(refusal(host, fixture("no-kill")),
            "plugin '" + fixture("no-kill") + "': the required task_runner hook kill is missing");
}

TEST(PluginHostTest, CreateFailureCarriesPluginMessageAndDestroysTheInstance) {
  PluginHost host({});
  EXPECT_EQ(createRefusal(host, fixture("create-fails")),
            "plugin 'create-fails' (" + fixture("create-fails") +
                "): create failed: no licence for this machine");
  // The library is still loaded (the host keeps it): ask it how often destroy() ran.
  void* handle = ::dlopen(fixture("create-fails").c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto destroyed = reinterpret_cast<int (*)()>(::dlsym(handle, "dockhand_fixture_destroyed"));
  ASSERT_NE(destroyed, nullptr);
  EXPECT_EQ(destroyed(), 1);
  ::dlclose(handle);
}

TEST(PluginHostTest, ExceptionFromCreateBecomesAnError) {
  PluginHost host({});
  EXPECT_EQ(createRefusal(host, fixture("create-throws")),
            "plugin 'create-throws' (" + fixture("create-throws") +
                "): create failed: cannot open /dev/frobnicator");
}

TEST(PluginHostTest, RefusesDuplicatePluginName) {
  PluginHost host({kPluginDir});
  host.load("process");
  EXPECT_EQ(refusal(host, fixture("dup-process")),
            "plugin '" + fixture("dup-process") + "': duplicate plugin name 'process' (already " +
                "loaded from " + (kPluginDir / "dockhand-process.so").string() + ")");
}

TEST(PluginHostTest, RefusesConfigThatIsNotAnObject) {
  PluginHost host({});
  EXPECT_EQ(createRefusal(host, fixture("sdk-echo"), "[1]"),
            "plugin 'sdk-echo' (" + fixture("sdk-echo") + "): config must be a JSON object");
}

TEST(PluginHostTest, RefusesWrongKind) {
  PluginHost host({kPluginDir});
  try {
    host.createBlockMigration("process", "{}", {});
    FAIL() << "process created as a migration plugin";
  } catch (const PluginLoadError& e) {
    EXPECT_THAT(e.what(), HasSubstr("): not a block migration plugin"));
  }
}

// The reason a check refused, or "" when it passed.
std::string refusal(const Result<void>& checked) { return checked ? "" : checked.error().message; }

TEST(PluginHostTest, DescriptorChecks) {
  EXPECT_EQ(refusal(checkDescriptor(nullptr)), "dh_plugin_entry returned no descriptor");
  static const dh_task_runner_vtable kRunner = {
      sizeof(dh_task_runner_vtable),
      [](dh_plugin*, const char*) -> dh_status { return DH_OK; },
      [](dh_plugin*, uint64_t, int32_t, const char*) -> dh_status { return DH_OK; },
      nullptr,
      nullptr,
      0,
      nullptr,
      nullptr,
      nullptr};
  dh_plugin_descriptor d{};
  d.struct_size = sizeof d;
  d.abi_major = DH_ABI_MAJOR;
  d.abi_minor = DH_ABI_MINOR;
  d.name = "ok";
  d.version = "1";
  d.kinds = DH_KIND_TASK_RUNNER;
  d.create = [](const dh_host*, const char*, dh_plugin**) -> dh_status { return DH_OK; };
  d.destroy = [](dh_plugin*) {};
  d.last_error = [](dh_plugin*) -> const char* { return ""; };
  d.task_runner = &kRunner;
  EXPECT_EQ(refusal(checkDescriptor(&d)), "");

  auto changed = [&](auto&& change) {
    dh_plugin_descriptor copy = d;
    change(copy);
    return refusal(checkDescriptor(&copy));
  };
  EXPECT_EQ(changed([](auto& c) { c.name = "Bad Name"; }),
            "name is missing or not [a-z0-9_-]{1,64}");
  EXPECT_EQ(changed([](auto& c) { c.version = nullptr; }), "version is missing");
  EXPECT_EQ(changed([](auto& c) { c.destroy = nullptr; }), "the required hook destroy is missing");
  EXPECT_EQ(changed([](auto& c) { c.kinds = DH_KIND_BLOCK_MIGRATION; }),
            "has a task_runner table but does not declare that kind");
  EXPECT_EQ(changed([](auto& c) { c.kinds |= DH_KIND_RESOURCE_DISCOVERY; }),
            "declares kind resource_discovery but has no resource_discovery table");
  EXPECT_EQ(changed([](auto& c) { c.struct_size = 4; }), "descriptor struct_size 4 is too small");
  EXPECT_EQ(changed([](auto& c) { c.struct_size = 16; }),
            "descriptor struct_size 16 is smaller than ABI 1.0's " +
                std::to_string(sizeof(dh_plugin_descriptor)));
  EXPECT_EQ(changed([](auto& c) {
              c.kinds = 0;
              c.task_runner = nullptr;
            }),
            "declares no kind");
}

// A plugin written with plugin.hpp: hooks, exceptions, logs and host callbacks end to end.
TEST(PluginHostTest, SdkPluginRoundTrip) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  StatusRecorder recorder;
  std::unique_ptr<TaskRunnerPlugin> runner;
  {
    PluginHost host({kFixtureDir});
    runner = host.createTaskRunner(fixture("sdk-echo"), R"({"x":1})", recorder.callback());
  }  // the host is gone; the runner keeps its library loaded
  EXPECT_EQ(runner->name(), "sdk-echo");
  EXPECT_EQ(runner->instance().library().version(), "1.2.3");
  EXPECT_THAT(log.str(), HasSubstr("[plugin.sdk-echo] [info] echo created with config {\"x\":1}"));

  auto ok = runner->launch(R"({"task_id":5})");
  EXPECT_TRUE(ok.ok()) << ok.error;
  auto end = recorder.waitTerminal(5, std::chrono::milliseconds(0));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FINISHED);
  EXPECT_EQ(end->detail.at("result"), "echo");

  auto boom = runner->launch(R"({"task_id":6,"boom":1})");
  EXPECT_EQ(boom.status, DH_ERROR);
  EXPECT_EQ(boom.error, "boom happened");
  auto bad = runner->launch(R"({"task_id":7,"bad":1})");
  EXPECT_EQ(bad.status, DH_INVALID_ARGUMENT);
  EXPECT_EQ(bad.error, "payload/bad: not allowed");
  auto odd = runner->launch(R"({"task_id":8,"int-throw":1})");
  EXPECT_EQ(odd.status, DH_ERROR);
  EXPECT_EQ(odd.error, "unknown exception");
  auto killed = runner->kill(5, false, "x");
  EXPECT_EQ(killed.status, DH_NOT_FOUND);
  EXPECT_EQ(killed.error, "no task 5");
  auto dump = runner->threadDump(5);
  EXPECT_EQ(dump.status, DH_UNSUPPORTED);
  EXPECT_EQ(dump.error, "thread dumps are not supported by this runner");

  runner.reset();
  EXPECT_THAT(log.str(), HasSubstr("[plugin.sdk-echo] [info] echo destroyed"));
  spdlog::set_default_logger(previous);
  spdlog::drop("plugin.sdk-echo");
}

TEST(PluginHostTest, OlderMinorPluginLoadsAndRuns) {
  PluginHost host({});
  StatusRecorder recorder;
  auto runner = host.createTaskRunner(fixture("older-minor"), "{}", recorder.callback());
  EXPECT_EQ(runner->instance().library().abiVersion(), "1.0");
  EXPECT_EQ(runner->instance().descriptor().task_runner->task_stats, nullptr)
      << "a hook beyond the plugin's struct_size reads as NULL";
  auto launched = runner->launch(R"({"task_id":11})");
  ASSERT_TRUE(launched.ok()) << launched.error;
  auto end = recorder.waitTerminal(11, std::chrono::milliseconds(0));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FINISHED);
  EXPECT_EQ(end->detail.at("result"), "old plugin ran task 11");
  // The hook appended in 1.1 is absent: the host says so instead of reading past the table.
  auto stats = runner->taskStats(11);
  EXPECT_EQ(stats.status, DH_UNSUPPORTED);
  EXPECT_EQ(stats.error, "older-minor does not report task stats");
}

TEST(PluginHostTest, EveryFailingCallReturnsThePluginsMessage) {
  PluginHost host({});
  StatusRecorder recorder;
  auto runner = host.createTaskRunner(fixture("every-call-fails"), "{}", recorder.callback());
  auto expect_error = [](const PluginResult& r, const std::string& message) {
    EXPECT_EQ(r.status, DH_ERROR);
    EXPECT_EQ(r.error, message);
  };
  expect_error(runner->launch(R"({"task_id":1})"), "launch: no capacity");
  expect_error(runner->kill(1, true, "x"), "kill: refused");
  expect_error(runner->threadDump(1), "thread_dump: refused");
  expect_error(runner->taskStats(1), "task_stats: refused");
  auto discovery = host.createResourceDiscovery(fixture("every-call-fails"), "{}");
  expect_error(discovery->discover(R"({"name":"gpu","amount":1})"),
               "discover: the device registry is unreachable");
  expect_error(discovery->allocate(R"({"task_id":1,"name":"gpu","addresses":["0"]})"),
               "allocate: device is busy");
  expect_error(discovery->release(R"({"task_id":1,"name":"gpu","addresses":["0"]})"),
               "release: device did not reset");
  expect_error(discovery->describe(), "describe: no data");
  auto migration = host.createBlockMigration(fixture("every-call-fails"), "{}", {});
  expect_error(migration->migrate(R"({"blocks":[],"peers":[]})"), "migrate: disk full");
  migration->cancel();  // not implemented: a no-op
  EXPECT_TRUE(recorder.reports(1).empty()) << "a failed launch reports nothing";
}

TEST(PluginHostTest, ASlowCallIsWarnedAboutByTheHostsLimitAndStillWorks) {
  LogCapture log;
  PluginHost host({}, /*allow_insecure=*/false,
                  PluginCallSettings{std::chrono::seconds(60), std::chrono::milliseconds(50)});
  StatusRecorder recorder;
  auto runner =
      host.createTaskRunner(fixture("slow-launch"), R"({"launch_ms":250})", recorder.callback());
  auto launched = runner->instance().calls().call(
      {"launch", 3}, [&] { return runner->launch(R"({"task_id":3})"); });
  ASSERT_TRUE(launched.ok()) << launched.error;
  // The call thread counts and warns right after the call returned, which may be just after
  // the answer reached this thread.
  EXPECT_TRUE(dockhand::testing::eventually([&] {
    return runner->instance().calls().slowCalls() == 1;
  })) << runner->instance().calls().slowCalls();
  EXPECT_THAT(log.text(), HasSubstr("[plugin.slow-launch] [warning] launch() of task 3 took "));
  EXPECT_THAT(log.text(), HasSubstr(" ms (limit 50 ms, plugin_call_warn_ms; slow calls so far: "
                                    "1): the plugin's later calls waited meanwhile"));
  auto end = recorder.waitTerminal(3, std::chrono::milliseconds(0));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FINISHED);
}

TEST(PluginHostTest, ConfigIsCheckedAgainstThePluginsSchemaBeforeCreate) {
  PluginHost host({});
  const std::string label = "plugin 'schema-discovery' (" + fixture("schema-discovery") + "): ";
  EXPECT_EQ(createRefusal(host, fixture("schema-discovery"), R"({"resource":"fpga"})"),
            label + "config /addresses: is required");
  EXPECT_EQ(createRefusal(host, fixture("schema-discovery"),
                          R"({"resource":"fpga","addresses":["0",1],"mode":"turbo","limit":9,
                              "colour":"red"})"),
            label +
                "config /addresses/1: expected string, got integer; config /colour: unknown key "
                "(not allowed by the schema); config /limit: must be <= 8, got 9; config /mode: "
                R"(expected one of "fast", "safe", got "turbo")");
  EXPECT_EQ(createRefusal(host, fixture("schema-discovery"),
                          R"({"resource":"fpga","addresses":["0"],"mode":"safe"})"),
            "");
  EXPECT_FALSE(host.load(fixture("schema-discovery"))->configSchema().is_null());
}

TEST(PluginHostTest, RefusesFileWritableByGroupOrOthers) {
  FixtureCopy copy("sdk-echo");
  std::filesystem::permissions(copy.file(), std::filesystem::perms(0775));
  PluginHost strict({});
  EXPECT_EQ(refusal(strict, copy.file().string()),
            "plugin '" + copy.file().string() + "': refused: file " + copy.file().string() +
                " is writable by group or others (mode 0775); run chmod go-w on it, or set "
                "allow_insecure_plugins for development");
  PluginHost relaxed({}, /*allow_insecure=*/true);
  EXPECT_EQ(refusal(relaxed, copy.file().string()), "");
}

TEST(PluginHostTest, RefusesFileInDirectoryWritableByOthers) {
  FixtureCopy copy("sdk-echo");
  std::filesystem::permissions(copy.dir(), std::filesystem::perms(0777));
  PluginHost strict({});
  EXPECT_EQ(refusal(strict, copy.file().string()),
            "plugin '" + copy.file().string() + "': refused: directory " + copy.dir().string() +
                " is writable by group or others (mode 0777); run chmod go-w on it, or set "
                "allow_insecure_plugins for development");
}

// The descriptor of a plugin the build made against this header, loaded by the real loader.
const dh_plugin_descriptor* builtDescriptor(const std::string& file) {
  const std::string path = (kPluginDir / file).string();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept: the test's lifetime
  if (handle == nullptr) return nullptr;
  auto* entry = reinterpret_cast<dh_plugin_entry_fn>(::dlsym(handle, "dh_plugin_entry"));
  return entry != nullptr ? entry() : nullptr;
}

TEST(PluginHostTest, APluginBuiltAgainstThisHeaderAsksOnlyForTheMinorItsHooksNeed) {
  // Built against 1.DH_ABI_MINOR; what each fills decides which hosts may load it.
  const dh_plugin_descriptor* discovery = builtDescriptor("dockhand-static.so");
  const dh_plugin_descriptor* library = builtDescriptor("dockhand-library.so");
  const dh_plugin_descriptor* process = builtDescriptor("dockhand-process.so");
  ASSERT_NE(discovery, nullptr);
  ASSERT_NE(library, nullptr);
  ASSERT_NE(process, nullptr);
  EXPECT_EQ(discovery->abi_minor, 0) << "no hook after 1.0";
  EXPECT_EQ(library->abi_minor, 5) << "flags (1.4) and try_launch (1.5)";
  EXPECT_EQ(process->abi_minor, 6) << "detach and adopt (1.6)";
  // A host that claims an older minor loads what needs no more than it has.
  EXPECT_EQ(refusal(checkDescriptor(discovery, 0)), "");
  EXPECT_EQ(refusal(checkDescriptor(library, 5)), "");
  EXPECT_EQ(refusal(checkDescriptor(process, 6)), "");
  EXPECT_EQ(refusal(checkDescriptor(process, 5)),
            "needs ABI 1.6, host supports up to 1.5 (upgrade the agent, or use a plugin build "
            "that needs less)");
}

}  // namespace
}  // namespace dockhand::agent
