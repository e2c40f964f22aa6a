// The built-in `library` runner, loaded by the real plugin host, running task functions of a
// real job library (tests/fixtures/jobs/test_jobs.cpp). (Over 600 lines: the runner seen
// through the real host, much of it in both modes, threads and workers, over one fixture; the
// reaper has a file of its own, library_reaper_test.cpp.)
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "job_library.h"
#include "library_test_support.h"
#include "plugins/plugin_host.h"
#include "plugins/plugin_trust.h"
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
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string readFileText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LibraryPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(libs_.path() / "lib");
    library_path_ = installJobLibrary(libs_.path() / "lib", DOCKHAND_TEST_JOBS, "libtest-jobs.so");
    runner_ = makeRunner(json::object());
  }
  void TearDown() override { runner_.reset(); }

  // What every runner of the fixture is configured with: tasks on threads, by default.
  virtual json baseConfig() const { return json::object(); }

  // A runner whose config is baseConfig(), then `config`, plus {"libraries": {"test": <the
  // test library>}}.
  std::unique_ptr<TaskRunnerPlugin> makeRunner(const json& config) {
    json merged = baseConfig();
    merged.update(config);
    merged["libraries"]["test"] = library_path_;
    return host_.createTaskRunner("library", merged.dump(), recorder_.callback());
  }

  static json call(const std::string& function, json args = nullptr) {
    json payload = {{"library", "test"}, {"function", function}};
    if (!args.is_null()) payload["args"] = std::move(args);
    return payload;
  }

  // Launches `function` and returns its terminal report.
  dockhand::testing::Report run(std::uint64_t id, const json& payload,
                                std::vector<std::string> inputs = {}) {
    auto launched = runner_->launch(libraryTask(tasks_.path(), id, payload, std::move(inputs)));
    EXPECT_TRUE(launched.ok()) << launched.error;
    auto end = recorder_.waitTerminal(id);
    EXPECT_TRUE(end) << "task " << id << " never ended";
    return end.value_or(dockhand::testing::Report{});
  }

  // Launches `function` and waits until it wrote its "ready" output.
  void launchAndWaitReady(std::uint64_t id, const json& payload) {
    auto launched = runner_->launch(libraryTask(tasks_.path(), id, payload));
    ASSERT_TRUE(launched.ok()) << launched.error;
    ASSERT_TRUE(eventually([&] {
      return std::filesystem::exists(taskDir(tasks_.path(), id) / "output" / "ready");
    })) << "task "
        << id << " never got going";
  }

  TempDir libs_;
  TempDir tasks_;
  std::string library_path_;
  StatusRecorder recorder_;
  PluginHost host_{{DOCKHAND_PLUGIN_DIR}};
  std::unique_ptr<TaskRunnerPlugin> runner_;
};

// The tests every mode passes: tasks on threads of the agent, and in worker processes.
class LibraryModeTest : public LibraryPluginTest,
                        public ::testing::WithParamInterface<std::string> {
 protected:
  json baseConfig() const override {
    return GetParam() == "workers" ? json{{"worker_processes", 3}} : json::object();
  }
};

INSTANTIATE_TEST_SUITE_P(Library, LibraryModeTest, ::testing::Values("threads", "workers"),
                         [](const auto& test) { return test.param; });

TEST_P(LibraryModeTest, ArgsComeBackAsDirectResult) {
  auto end = run(1, call("echoArgs", json{{"words", {"a", "b"}}}));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  const json& result = end.detail.at("result");
  EXPECT_EQ(json::parse(result.at("value").get<std::string>()), (json{{"words", {"a", "b"}}}));
  EXPECT_EQ(result.at("bytes"), result.at("value").get<std::string>().size());
  EXPECT_GE(result.at("duration_ms").get<std::int64_t>(), 0);
  EXPECT_FALSE(result.contains("block"));
  auto reports = recorder_.reports(1);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].state, DH_TASK_RUNNING);
}

// A task that returns at once may end before its launch returns; its RUNNING still comes
// first, and only once, for every task of a burst.
TEST_P(LibraryModeTest, EveryTasksRunningComesBeforeItsEndHoweverQuickly) {
  constexpr std::uint64_t kTasks = 200;
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    auto launched = runner_->launch(libraryTask(tasks_.path(), id, call("echoArgs", json{1})));
    ASSERT_TRUE(launched.ok()) << launched.error;
  }
  for (std::uint64_t id = 1; id <= kTasks; ++id) {
    ASSERT_TRUE(recorder_.waitTerminal(id)) << "task " << id << " never ended";
    const auto reports = recorder_.reports(id);
    ASSERT_EQ(reports.size(), 2u) << "task " << id;
    EXPECT_EQ(reports[0].state, DH_TASK_RUNNING) << "task " << id;
    EXPECT_EQ(reports[1].state, DH_TASK_FINISHED) << "task " << id;
  }
}

// plugin_trust covers the job libraries the runner loads (dh_host.verify_code): under
// "verified", a library in no catalog is refused at launch with the mend, counted, and runs
// once pinned, with no restart; the bytes checked are the bytes loaded.
TEST_P(LibraryModeTest, AJobLibraryThePolicyDoesNotTrustIsRefusedUntilPinned) {
  const std::filesystem::path catalog = libs_.path() / "trusted.sha256";
  auto pin = [&](const std::filesystem::path& file) {
    std::ofstream(catalog, std::ios::app)
        << agent::sha256Hex(readFileText(file)) << "  " << file.string() << "\n";
  };
  pin(std::filesystem::path(DOCKHAND_PLUGIN_DIR) / "dockhand-library.so");
  agent::PluginTrust trust;
  trust.policy = agent::PluginTrust::Policy::kVerified;
  trust.catalogs = {catalog};
  PluginHost strict({DOCKHAND_PLUGIN_DIR}, false, PluginCallSettings{}, trust);
  json config = baseConfig();
  config["libraries"]["test"] = library_path_;
  runner_ = strict.createTaskRunner("library", config.dump(), recorder_.callback());

  auto refused = runner_->launch(libraryTask(tasks_.path(), 1, call("echoArgs", "x")));
  EXPECT_EQ(refused.status, DH_ERROR);
  EXPECT_THAT(refused.error,
              HasSubstr("job library '" + library_path_ +
                        "': refused by plugin_trust (policy verified): its SHA-256"));
  EXPECT_THAT(refused.error, HasSubstr("dockhand plugins trust " + library_path_));

  pin(library_path_);
  auto end = run(2, call("echoArgs", "x"));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  EXPECT_EQ(end.detail.at("result").at("value"), "\"x\"");
  runner_.reset();
}

TEST_P(LibraryModeTest, ArgsDefaultToNull) {
  auto end = run(1, call("echoArgs"));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  EXPECT_EQ(end.detail.at("result").at("value"), "null");
}

TEST_P(LibraryModeTest, FunctionSeesTheTasksIdAttemptAndPartition) {
  auto end = run(42, call("describeTask"));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  EXPECT_EQ(json::parse(end.detail.at("result").at("value").get<std::string>()),
            (json{{"id", 42}, {"attempt", 2}, {"partition", 5}}));
}

TEST_P(LibraryModeTest, ResultThatIsNotUtf8ComesBackAsBase64) {
  auto end = run(1, call("binaryResult"));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  const json& result = end.detail.at("result");
  EXPECT_EQ(result.at("value_base64"), "//4AAQ==");
  EXPECT_EQ(result.at("bytes"), 4);
  EXPECT_FALSE(result.contains("value"));
}

TEST_P(LibraryModeTest, LargeResultBecomesABlockFile) {
  runner_ = makeRunner({{"max_direct_result_bytes", 100}});
  auto end = run(7, call("resultOfBytes", {{"bytes", 1000}}));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  const json& result = end.detail.at("result");
  EXPECT_EQ(result.at("block"), "task_7_result");
  EXPECT_EQ(result.at("bytes"), 1000);
  EXPECT_FALSE(result.contains("value"));
  EXPECT_EQ(readFileText(taskDir(tasks_.path(), 7) / "output" / "task_7_result"),
            std::string(1000, 'r'));
}

TEST_P(LibraryModeTest, ResultAtTheDirectLimitStaysDirect) {
  runner_ = makeRunner({{"max_direct_result_bytes", 100}});
  auto end = run(7, call("resultOfBytes", {{"bytes", 100}}));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  EXPECT_EQ(end.detail.at("result").at("value"), std::string(100, 'r'));
  EXPECT_FALSE(std::filesystem::exists(taskDir(tasks_.path(), 7) / "output" / "task_7_result"));
}

TEST_P(LibraryModeTest, ResultAboveTheMaximumFails) {
  runner_ = makeRunner({{"max_direct_result_bytes", 10}, {"max_result_bytes", 100}});
  auto end = run(1, call("resultOfBytes", {{"bytes", 101}}));
  ASSERT_EQ(end.state, DH_TASK_FAILED) << end.detail;
  EXPECT_EQ(end.detail.at("reason"), "result of 101 bytes is above max_result_bytes (100)");
}

TEST_P(LibraryModeTest, ReadsInputsInTheTasksOrder) {
  auto input_dir = taskDir(tasks_.path(), 1) / "input";
  std::filesystem::create_directories(input_dir);
  std::ofstream(input_dir / "rdd_1_1") << "world";
  std::ofstream(input_dir / "rdd_1_0") << "hello ";
  { std::ofstream empty(input_dir / "rdd_1_2"); }
  auto end = run(1, call("concatInputs"), {"rdd_1_0", "rdd_1_1", "rdd_1_2"});
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  EXPECT_EQ(end.detail.at("result").at("value"), "hello world");
}

TEST_P(LibraryModeTest, InputNotOfTheTaskFailsIt) {
  auto end = run(1, call("readMissingInput"));
  ASSERT_EQ(end.state, DH_TASK_FAILED) << end.detail;
  EXPECT_THAT(end.detail.at("reason").get<std::string>(),
              HasSubstr("'rdd_9_9' is not an input of this task"));
}

TEST_P(LibraryModeTest, OutputsAreAppendedToFilesInTheOutputDirectory) {
  auto end =
      run(3, call("writeOutputs",
                  {{"outputs", {{"task_3_a", {"one ", "two"}}, {"task_3_b", json::array({""})}}}}));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  auto output = taskDir(tasks_.path(), 3) / "output";
  EXPECT_EQ(readFileText(output / "task_3_a"), "one two");
  EXPECT_TRUE(std::filesystem::exists(output / "task_3_b"));
  EXPECT_EQ(std::filesystem::file_size(output / "task_3_b"), 0u);
}

TEST_P(LibraryModeTest, OutputIdThatIsNotAFileNameIsRefused) {
  auto end = run(1, call("writeBadOutput"));
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  EXPECT_THAT(end.detail.at("result").at("value").get<std::string>(),
              StartsWith(std::to_string(DH_INVALID_ARGUMENT) + ": write_output: '../escape'"));
  EXPECT_FALSE(std::filesystem::exists(taskDir(tasks_.path(), 1) / "escape"));
}

TEST_P(LibraryModeTest, ThrownErrorFailsTheTaskWithItsMessage) {
  auto end = run(1, call("failByThrowing"));
  ASSERT_EQ(end.state, DH_TASK_FAILED) << end.detail;
  EXPECT_EQ(end.detail.at("reason"), "broken on purpose");
}

TEST_P(LibraryModeTest, ErrorWithoutMessageNamesTheFunction) {
  auto end = run(1, call("returnErrorSilently"));
  ASSERT_EQ(end.state, DH_TASK_FAILED) << end.detail;
  EXPECT_EQ(end.detail.at("reason"),
            "function 'returnErrorSilently' of job library 'test' returned status 1 without an "
            "error message");
}

TEST_P(LibraryModeTest, KillStopsATaskThatPollsCancelled) {
  launchAndWaitReady(1, call("pollUntilCancelled"));
  ASSERT_TRUE(runner_->kill(1, false, "stage cancelled").ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED) << end->detail;
  EXPECT_EQ(end->detail.at("reason"), "stage cancelled");
}

TEST_P(LibraryModeTest, KillWakesABlockedTaskThroughItsCallback) {
  launchAndWaitReady(1, call("blockUntilKillCallback"));
  ASSERT_TRUE(runner_->kill(1, true, "job cancelled").ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED) << end->detail;
  EXPECT_EQ(end->detail.at("reason"), "job cancelled");
  EXPECT_EQ(recorder_.reports(1).size(), 2u);
}

TEST_P(LibraryModeTest, KillOfAnEndedOrUnknownTaskIsNotFound) {
  run(1, call("echoArgs"));
  EXPECT_EQ(runner_->kill(1, false, "late").status, DH_NOT_FOUND);
  EXPECT_EQ(runner_->kill(99, false, "never").status, DH_NOT_FOUND);
}

TEST_P(LibraryModeTest, ThreadDumpShowsTheTaskThreadsRealStack) {
  launchAndWaitReady(1, call("spinUntilCancelled"));
  // The ready file appears when markReady opens it, a moment before the task gets to
  // spinForDump: a dump taken in between shows the task inside markReady. Ask until the stack
  // is the spinning one.
  json parsed;
  bool named = false;
  eventually([&] {
    auto dump = runner_->threadDump(1);
    if (!dump.ok()) return false;
    parsed = json::parse(dump.json);
    if (parsed.at("threads").size() != 1u || !parsed["threads"][0].contains("stack")) return false;
    for (const auto& frame : parsed["threads"][0].at("stack")) {
      named = named || frame.get<std::string>().rfind("spinForDump+", 0) == 0;
    }
    return named;
  });
  EXPECT_EQ(parsed.at("task_id"), 1);
  ASSERT_EQ(parsed.at("threads").size(), 1u);
  const json& thread = parsed.at("threads").at(0);
  EXPECT_EQ(thread.at("function"), "spinUntilCancelled");
  EXPECT_EQ(thread.at("library"), "test");
  EXPECT_GT(thread.at("tid").get<std::int64_t>(), 0);
  ASSERT_FALSE(thread.contains("error")) << thread;
  EXPECT_TRUE(named) << thread.at("stack").dump(1);

  auto stats = runner_->taskStats(1);
  ASSERT_TRUE(stats.ok()) << stats.error;
  EXPECT_TRUE(json::parse(stats.json).contains("cpu_time_ms")) << stats.json;

  ASSERT_TRUE(runner_->kill(1, false, "done").ok());
  ASSERT_TRUE(recorder_.waitTerminal(1));
  EXPECT_EQ(runner_->threadDump(1).status, DH_NOT_FOUND);
}

TEST_P(LibraryModeTest, TasksRunAtOnceOnThreadsOfTheirOwn) {
  launchAndWaitReady(1, call("pollUntilCancelled"));
  launchAndWaitReady(2, call("blockUntilKillCallback"));
  auto end = run(3, call("echoArgs", 3));
  EXPECT_EQ(end.state, DH_TASK_FINISHED);
  ASSERT_TRUE(runner_->kill(1, false, "k").ok());
  ASSERT_TRUE(runner_->kill(2, false, "k").ok());
  EXPECT_TRUE(recorder_.waitTerminal(1));
  EXPECT_TRUE(recorder_.waitTerminal(2));
}

// try_launch (called on the agent's core thread) starts a task only when nothing is to be
// waited for: on threads, once the job library is loaded; never in worker processes.
TEST_P(LibraryModeTest, TryLaunchStartsATaskOnlyOnceItsLibraryIsLoadedAndOnThreads) {
  ASSERT_TRUE(runner_->canTryLaunch());
  const auto first = runner_->tryLaunch(libraryTask(tasks_.path(), 1, call("echoArgs", 1)));
  EXPECT_EQ(first.status, DH_UNSUPPORTED) << "the library is not loaded yet";
  EXPECT_TRUE(first.error.empty());
  EXPECT_TRUE(recorder_.reports(1).empty()) << "a declined try_launch starts nothing";
  EXPECT_EQ(run(1, call("echoArgs", 1)).state, DH_TASK_FINISHED);
  const auto second = runner_->tryLaunch(libraryTask(tasks_.path(), 2, call("echoArgs", 2)));
  if (GetParam() == "workers") {
    EXPECT_EQ(second.status, DH_UNSUPPORTED) << "a worker process is handed its task over I/O";
    return;
  }
  ASSERT_TRUE(second.ok()) << second.error;
  auto end = recorder_.waitTerminal(2);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FINISHED);
  EXPECT_EQ(json::parse(end->detail.at("result").at("value").get<std::string>()), 2);
  // A bad task is refused by try_launch as by launch.
  const auto refused = runner_->tryLaunch(libraryTask(tasks_.path(), 3, call("noSuchFunction")));
  EXPECT_EQ(refused.status, DH_INVALID_ARGUMENT);
  EXPECT_THAT(refused.error, HasSubstr("has no function 'noSuchFunction'"));
  EXPECT_TRUE(recorder_.reports(3).empty());
}

TEST_P(LibraryModeTest, ShutdownKillsRunningTasks) {
  launchAndWaitReady(1, call("blockUntilKillCallback"));
  runner_.reset();
  auto end = recorder_.waitTerminal(1, std::chrono::milliseconds(0));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_EQ(end->detail.at("reason"), "task runner shut down");
}

// ---- launch errors: the launch fails, nothing is reported -----------------------------------

class LibraryLaunchErrorTest : public LibraryPluginTest {
 protected:
  PluginResult launchWith(const json& payload) {
    auto result = runner_->launch(libraryTask(tasks_.path(), 1, payload));
    EXPECT_FALSE(result.ok());
    EXPECT_TRUE(recorder_.reports(1).empty());
    return result;
  }
};

TEST_F(LibraryLaunchErrorTest, UnknownPayloadKey) {
  auto result = launchWith({{"library", "test"}, {"function", "echoArgs"}, {"argz", 1}});
  EXPECT_EQ(result.status, DH_INVALID_ARGUMENT);
  EXPECT_EQ(result.error, "payload/argz: unknown key (known keys: library, function, args)");
}

TEST_F(LibraryLaunchErrorTest, MissingLibraryOrFunction) {
  auto no_library = launchWith({{"function", "echoArgs"}});
  EXPECT_EQ(no_library.status, DH_INVALID_ARGUMENT);
  EXPECT_THAT(no_library.error, StartsWith("payload/library: missing"));
  auto no_function = launchWith({{"library", "test"}});
  EXPECT_EQ(no_function.status, DH_INVALID_ARGUMENT);
  EXPECT_THAT(no_function.error, StartsWith("payload/function: missing"));
}

TEST_F(LibraryLaunchErrorTest, UnknownLibraryNameListsTheConfiguredOnes) {
  auto result = launchWith({{"library", "tset"}, {"function", "echoArgs"}});
  EXPECT_EQ(result.status, DH_INVALID_ARGUMENT);
  EXPECT_EQ(result.error,
            "payload/library: no job library 'tset' in config/libraries (configured: test); name "
            "one of them or give the absolute path of a job library");
}

TEST_F(LibraryLaunchErrorTest, UnknownFunctionListsTheLibrarysFunctions) {
  auto result = launchWith({{"library", "test"}, {"function", "echoArg"}});
  EXPECT_EQ(result.status, DH_INVALID_ARGUMENT);
  EXPECT_THAT(result.error, StartsWith("payload/function: job library 'test-jobs' (" +
                                       library_path_ + ") has no function 'echoArg' (it has: "));
  EXPECT_THAT(result.error, HasSubstr("echoArgs, describeTask"));
}

TEST_F(LibraryLaunchErrorTest, LibraryByAbsolutePathRuns) {
  auto end = run(1, {{"library", library_path_}, {"function", "echoArgs"}, {"args", "hi"}});
  ASSERT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
  EXPECT_EQ(end.detail.at("result").at("value"), "\"hi\"");
}

TEST_F(LibraryLaunchErrorTest, WritableLibraryFileIsRefusedUnlessAllowed) {
  auto path = installJobLibrary(libs_.path() / "lib", DOCKHAND_TEST_JOBS, "libopen.so", 0775);
  auto result = launchWith({{"library", path}, {"function", "echoArgs"}});
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_EQ(result.error, "job library '" + path + "': refused: file " + path +
                              " is writable by group or others (mode 0775); run chmod go-w on "
                              "it, or set allow_insecure_libraries for development");

  runner_ = makeRunner({{"allow_insecure_libraries", true}});
  auto end = run(2, {{"library", path}, {"function", "echoArgs"}});
  EXPECT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
}

TEST_F(LibraryLaunchErrorTest, LibraryOfAnotherAbiMajorIsRefused) {
  auto path = installJobLibrary(libs_.path() / "lib", DOCKHAND_TEST_JOBS_WRONG_MAJOR, "libwm.so");
  auto result = launchWith({{"library", path}, {"function", "nothing"}});
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_EQ(result.error, "job library '" + path + "': built against job ABI 2.0, this runner " +
                              "speaks 1.0 (the major version must be equal); rebuild it against " +
                              "this SDK");
}

TEST_F(LibraryLaunchErrorTest, MissingLibraryFileIsNamed) {
  auto path = (libs_.path() / "lib" / "libnone.so").string();
  auto result = launchWith({{"library", path}, {"function", "x"}});
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_EQ(result.error, "job library '" + path + "': no such file");
}

// ---- config -----------------------------------------------------------------------------------

TEST_F(LibraryPluginTest, ConfigRefusesUnknownKeysAndAResultMaximumBelowTheDirectOne) {
  try {
    makeRunner({{"kill_timeout", 5}});
    ADD_FAILURE() << "an unknown key was accepted";
  } catch (const PluginLoadError& e) {
    EXPECT_THAT(e.what(), HasSubstr("kill_timeout"));
  }
  try {
    makeRunner({{"max_direct_result_bytes", 10}, {"max_result_bytes", 5}});
    ADD_FAILURE() << "max_result_bytes below max_direct_result_bytes was accepted";
  } catch (const PluginLoadError& e) {
    EXPECT_THAT(e.what(), HasSubstr("config/max_result_bytes: must be at least "
                                    "config/max_direct_result_bytes (10)"));
  }
}

// ---- worker processes: what only they do -------------------------------------------------

class LibraryWorkerTest : public LibraryPluginTest {
 protected:
  json baseConfig() const override { return {{"worker_processes", 2}}; }

  // The pid of the worker process that runs the next task.
  pid_t workerPid(std::uint64_t id) {
    auto end = run(id, call("processId"));
    EXPECT_EQ(end.state, DH_TASK_FINISHED) << end.detail;
    return static_cast<pid_t>(std::stol(end.detail.at("result").at("value").get<std::string>()));
  }
};

TEST_F(LibraryWorkerTest, TasksRunInWorkerProcessesNotInTheAgent) {
  const pid_t worker = workerPid(1);
  EXPECT_NE(worker, ::getpid());
  EXPECT_EQ(::getpgid(worker), worker) << "a worker leads a process group of its own";
}

TEST_F(LibraryWorkerTest, CrashingTaskFailsWithTheSignalAndItsWorkerIsReplaced) {
  auto end = run(1, call("crash"));
  ASSERT_EQ(end.state, DH_TASK_FAILED) << end.detail;
  const std::string reason = end.detail.at("reason");
  EXPECT_THAT(reason, HasSubstr("running task 1 (library test, function crash) died: signal 6 "
                                "(SIGABRT)"));
  const pid_t crashed = std::stoi(reason.substr(reason.find("worker process ") + 15));
  EXPECT_TRUE(eventually([&] { return ::kill(crashed, 0) != 0; })) << "the dead worker was reaped";
  // The pool is whole again: two tasks run at once, on two live workers.
  launchAndWaitReady(2, call("pollUntilCancelled"));
  launchAndWaitReady(3, call("pollUntilCancelled"));
  ASSERT_TRUE(runner_->kill(2, false, "k").ok());
  ASSERT_TRUE(runner_->kill(3, false, "k").ok());
  EXPECT_TRUE(recorder_.waitTerminal(2));
  EXPECT_TRUE(recorder_.waitTerminal(3));
  EXPECT_NE(workerPid(4), crashed);
}

TEST_F(LibraryWorkerTest, IgnoredKillCostsItsWorkerNotTheAgent) {
  runner_ = makeRunner({{"kill_timeout_ms", 200}});
  launchAndWaitReady(1, call("ignoreKill", {{"ms", 30000}}));
  ASSERT_TRUE(runner_->kill(1, false, "stage cancelled").ok());
  auto end = recorder_.waitTerminal(1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_THAT(end->detail.at("reason").get<std::string>(),
              ::testing::MatchesRegex("task 1 \\(library test, function ignoreKill\\) did not "
                                      "return within kill_timeout_ms \\(200 ms\\) of its kill "
                                      "\\(stage cancelled\\); its worker process [0-9]+ was "
                                      "killed"));
  EXPECT_EQ(recorder_.reports(1).size(), 2u);
  EXPECT_EQ(run(2, call("echoArgs", 2)).state, DH_TASK_FINISHED);
}

TEST_F(LibraryWorkerTest, TasksBeyondTheWorkersWaitForOne) {
  launchAndWaitReady(1, call("pollUntilCancelled"));
  launchAndWaitReady(2, call("pollUntilCancelled"));
  ASSERT_TRUE(runner_->launch(libraryTask(tasks_.path(), 3, call("echoArgs", 3))).ok());
  EXPECT_FALSE(recorder_.waitTerminal(3, std::chrono::milliseconds(300)))
      << "a third task ran while both workers were busy";
  auto dump = runner_->threadDump(3);
  ASSERT_TRUE(dump.ok()) << dump.error;
  EXPECT_EQ(json::parse(dump.json).at("threads").at(0).at("state"), "queued");
  ASSERT_TRUE(runner_->kill(1, false, "k").ok());
  auto end = recorder_.waitTerminal(3);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_FINISHED);
  ASSERT_TRUE(runner_->kill(2, false, "k").ok());
  EXPECT_TRUE(recorder_.waitTerminal(2));
}

TEST_F(LibraryWorkerTest, KillOfAQueuedTaskEndsItAtOnce) {
  launchAndWaitReady(1, call("pollUntilCancelled"));
  launchAndWaitReady(2, call("pollUntilCancelled"));
  ASSERT_TRUE(runner_->launch(libraryTask(tasks_.path(), 3, call("echoArgs", 3))).ok());
  ASSERT_TRUE(runner_->kill(3, false, "not needed").ok());
  auto end = recorder_.waitTerminal(3);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->state, DH_TASK_KILLED);
  EXPECT_EQ(end->detail.at("reason"), "not needed");
  EXPECT_EQ(recorder_.reports(3).size(), 1u) << "it never ran";
  ASSERT_TRUE(runner_->kill(1, false, "k").ok());
  ASSERT_TRUE(runner_->kill(2, false, "k").ok());
  EXPECT_TRUE(recorder_.waitTerminal(1));
  EXPECT_TRUE(recorder_.waitTerminal(2));
}

TEST_F(LibraryWorkerTest, UnknownFunctionFailsTheTaskInItsWorker) {
  auto end = run(1, call("nope"));
  ASSERT_EQ(end.state, DH_TASK_FAILED);
  EXPECT_THAT(end.detail.at("reason").get<std::string>(),
              HasSubstr("payload/function: job library 'test-jobs' (" + library_path_ +
                        ") has no function 'nope' (it has: echoArgs, "));
  EXPECT_EQ(recorder_.reports(1).size(), 1u) << "no RUNNING for a task that never started";
}

// The same reason every time, also from a worker that was sent the file with an earlier run.
TEST_F(LibraryWorkerTest, LibraryOfAnotherAbiMajorFailsTheTask) {
  runner_ = makeRunner({{"worker_processes", 1}});
  auto path = installJobLibrary(libs_.path() / "lib", DOCKHAND_TEST_JOBS_WRONG_MAJOR, "libw.so");
  for (std::uint64_t id : {1, 2}) {
    auto end = run(id, {{"library", path}, {"function", "nothing"}});
    ASSERT_EQ(end.state, DH_TASK_FAILED);
    EXPECT_THAT(end.detail.at("reason").get<std::string>(),
                HasSubstr("job library '" + path + "': built against job ABI 2."));
  }
}

TEST_F(LibraryWorkerTest, InsecureLibraryIsRefusedAtLaunchAsOnThreads) {
  auto path = installJobLibrary(libs_.path() / "lib", DOCKHAND_TEST_JOBS, "libopen.so", 0775);
  auto result =
      runner_->launch(libraryTask(tasks_.path(), 1, {{"library", path}, {"function", "echoArgs"}}));
  EXPECT_EQ(result.status, DH_ERROR);
  EXPECT_THAT(result.error, HasSubstr("is writable by group or others"));
}

TEST_F(LibraryWorkerTest, MissingWorkerProgramIsRefusedWithItsPath) {
  try {
    makeRunner({{"worker_program", "/nonexistent/dockhand-library-worker"}});
    ADD_FAILURE() << "a missing worker program was accepted";
  } catch (const PluginLoadError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the worker program /nonexistent/dockhand-library-worker "
                                    "cannot be run"));
  }
}

// What is loaded is the file that was opened and checked, whatever the path names by then.
TEST(JobLibraryTest, TheOpenedFileIsLoadedNotWhatThePathNamesLater) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "lib");
  const std::string path =
      installJobLibrary(dir.path() / "lib", DOCKHAND_TEST_JOBS, "libswapped.so");
  const int fd = plugins::library::JobLibrary::openFile(path, false, {});
  ASSERT_GE(fd, 0);
  const std::string other =
      installJobLibrary(dir.path() / "lib", DOCKHAND_TEST_JOBS_WRONG_MAJOR, "libother.so");
  std::filesystem::rename(other, path);  // the path now names another file
  auto library = plugins::library::JobLibrary::load(fd, path);
  EXPECT_EQ(library->name(), "test-jobs");
  EXPECT_NE(library->find("echoArgs"), nullptr);
  try {
    plugins::library::JobLibrary::open(path, false, {});
    ADD_FAILURE() << "the file the path names now was accepted";
  } catch (const plugins::library::LibraryRefused& e) {
    EXPECT_THAT(e.what(), HasSubstr("built against job ABI 2."));
  }
}

}  // namespace
}  // namespace dockhand::agent
