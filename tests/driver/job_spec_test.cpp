#include "dockhand/driver/job_spec.h"

#include <gtest/gtest.h>

namespace dockhand::driver {
namespace {

JobSpec parseJobText(const std::string& text) {
  return parseJob(Json::parse(text), "jobs/test.json", "/abs/jobs");
}

std::string jobErrorOf(const std::string& text) {
  try {
    parseJobText(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(JobSpecTest, ShellAndCommandBecomePayloadWithJobDirSubstituted) {
  JobSpec job = parseJobText(R"({"name": "wc", "aggregate": "sum", "max_attempts": 2,
    "properties": {"k": "v"},
    "tasks": [{"name": "a", "shell": "wc -w < ${JOB_DIR}/data/a.txt"},
              {"command": ["${JOB_DIR}/bin/x", "--in=${JOB_DIR}"], "env": {"D": "${JOB_DIR}"},
               "cpus": 2, "resources": {"gpu": 1}}]})");
  EXPECT_EQ(job.name, "wc");
  EXPECT_EQ(job.aggregate, Aggregate::kSum);
  EXPECT_EQ(job.max_attempts, 2);
  EXPECT_EQ(job.properties.at("k"), "v");
  ASSERT_EQ(job.tasks.size(), 2u);
  EXPECT_EQ(job.tasks[0].payload, Json({{"shell", "wc -w < /abs/jobs/data/a.txt"}}));
  EXPECT_EQ(job.tasks[0].partition, 0);
  EXPECT_EQ(job.tasks[1].name, "task-1");
  EXPECT_EQ(job.tasks[1].partition, 1);
  EXPECT_EQ(job.tasks[1].cpus, 2);
  EXPECT_EQ(job.tasks[1].resources.at("gpu"), 1);
  EXPECT_EQ(job.tasks[1].payload["command"][0], "/abs/jobs/bin/x");
  EXPECT_EQ(job.tasks[1].payload["command"][1], "--in=/abs/jobs");
  EXPECT_EQ(job.tasks[1].payload["env"]["D"], "/abs/jobs");
}

TEST(JobSpecTest, NameDefaultsToTheFileStem) {
  EXPECT_EQ(parseJobText(R"({"tasks": [{"shell": "true"}]})").name, "test");
}

TEST(JobSpecTest, ErrorsNameTheFileAndJsonPath) {
  EXPECT_EQ(jobErrorOf(R"({"tasks": [{"shell": "true", "cpu": 1}]})")
                .rfind("jobs/test.json: /tasks/0/cpu: unknown key", 0),
            0u)
      << jobErrorOf(R"({"tasks": [{"shell": "true", "cpu": 1}]})");
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "true", "cpus": 0}]})").find("/tasks/0/cpus"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": []})").find("/tasks: must be a non-empty array"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"name": "x"}]})").find("exactly one of"), std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "a", "command": ["b"]}]})").find("exactly one of"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"aggregate": "avg", "tasks": [{"shell": "a"}]})").find("/aggregate"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"name": "a", "shell": "a"}, {"name": "a", "shell": "b"}]})")
                .find("/tasks/1/name: duplicate task name 'a'"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "a", "resources": {"gpu": "1"}}]})")
                .find("/tasks/0/resources/gpu"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"([1])").find("jobs/test.json: /: expected an object"), std::string::npos);
}

TEST(JobSpecTest, LibraryShorthandBecomesALibraryRunnerPayload) {
  JobSpec job = parseJobText(R"({"tasks": [
    {"name": "count", "library": "words", "function": "count",
     "args": {"file": "${JOB_DIR}/data/a.txt", "n": [1, 2]}},
    {"library": "${JOB_DIR}/lib/libwords.so", "function": "ns.split-2", "runner": "library",
     "outputs": ["shuffle_0_1_0"]},
    {"library": "words", "function": "sum", "args": null, "inputs": ["shuffle_0_1_0"]}]})");
  ASSERT_EQ(job.tasks.size(), 3u);
  EXPECT_EQ(job.tasks[0].runner, "library");
  EXPECT_EQ(job.tasks[0].payload,
            Json({{"library", "words"},
                  {"function", "count"},
                  {"args", {{"file", "/abs/jobs/data/a.txt"}, {"n", {1, 2}}}}}));
  EXPECT_EQ(job.tasks[1].runner, "library");
  EXPECT_EQ(job.tasks[1].payload,
            Json({{"library", "/abs/jobs/lib/libwords.so"}, {"function", "ns.split-2"}}));
  EXPECT_EQ(job.tasks[1].outputs, std::vector<std::string>{"shuffle_0_1_0"});
  // "args": null is no args: the runner hands the function "null" either way.
  EXPECT_EQ(job.tasks[2].payload, Json({{"library", "words"}, {"function", "sum"}}));
  EXPECT_EQ(job.tasks[2].inputs, std::vector<std::string>{"shuffle_0_1_0"});
}

TEST(JobSpecTest, LibraryTaskErrorsNameTheirPath) {
  auto expect = [](const std::string& text, const std::string& wanted) {
    const std::string error = jobErrorOf(text);
    EXPECT_NE(error.find(wanted), std::string::npos) << text << "\n  gave: " << error;
  };
  expect(R"({"tasks": [{"library": "w"}]})",
         R"(jobs/test.json: /tasks/0/function: is required with "library")");
  expect(R"({"tasks": [{"shell": "a"}, {"library": "w", "function": "f", "shell": "x"}]})",
         R"(/tasks/1/library: give exactly one of "payload", "command", "shell" or "library")");
  expect(R"({"tasks": [{"payload": {}, "library": "w", "function": "f"}]})",
         "/tasks/0/payload: give exactly one of");
  expect(R"({"tasks": [{"library": "", "function": "f"}]})", "/tasks/0/library: must name");
  expect(R"({"tasks": [{"library": 3, "function": "f"}]})", "/tasks/0/library");
  expect(R"({"tasks": [{"library": "w", "function": "a b"}]})",
         "/tasks/0/function: 'a b' is not a task function name");
  expect(R"({"tasks": [{"library": "w", "function": ""}]})", "/tasks/0/function:");
  expect(R"({"tasks": [{"library": "w", "function": "f", "runner": "process"}]})",
         R"(/tasks/0/runner: is 'process', but "library" tasks run on the 'library' runner)");
  expect(R"({"tasks": [{"library": "w", "function": "f", "env": {"A": "b"}}]})",
         R"(/tasks/0/env: applies to "command" and "shell" tasks)");
  expect(R"({"tasks": [{"library": "w", "function": "f", "cwd": "/tmp"}]})", "/tasks/0/cwd:");
  expect(R"({"tasks": [{"shell": "a", "function": "f"}]})",
         R"(/tasks/0/function: belongs to a library task (give "library" too))");
  expect(R"({"tasks": [{"command": ["a"], "args": [1]}]})", "/tasks/0/args: belongs to a library");
  expect(R"({"tasks": [{"library": "w", "function": "f", "arg": 1}]})",
         "/tasks/0/arg: unknown key");
}

TEST(JobSpecTest, ResourceAmountsAreWholeOrAFractionBelowOne) {
  JobSpec job =
      parseJobText(R"({"tasks": [{"shell": "a", "resources": {"gpu": 0.25, "fpga": 2}}]})");
  EXPECT_EQ(job.tasks[0].resources.at("gpu"), 0.25);
  EXPECT_EQ(job.tasks[0].resources.at("fpga"), 2);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "a", "resources": {"gpu": 1.5}}]})")
                .find("/tasks/0/resources/gpu: 1.5 is above 1 but not a whole number"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "a", "resources": {"gpu": 0}}]})")
                .find("/tasks/0/resources/gpu: 0 is out of range"),
            std::string::npos);
}

TEST(JobSpecTest, ServedTaskAmountsComeFromTheTasksWhenTheConfigNamesNone) {
  JobSpec job = parseJobText(R"({"name": "j", "tasks": [
      {"shell": "a", "resources": {"gpu": 0.25, "fpga": 1}},
      {"shell": "b", "resources": {"gpu": 0.25}},
      {"shell": "c"}]})");
  protocol::ResourceProfile profile;
  EXPECT_TRUE(completeTaskResources(job, profile).empty());
  EXPECT_EQ(profile.task_resources, (std::map<std::string, double>{{"fpga", 1}, {"gpu", 0.25}}));
}

TEST(JobSpecTest, TheConfigsTaskAmountWinsWithAWarningWhenItDiffers) {
  JobSpec job = parseJobText(R"({"name": "j", "tasks": [{"shell": "a", "resources": {"gpu": 0.25}},
                                                 {"shell": "b", "resources": {"fpga": 1}}]})");
  protocol::ResourceProfile profile;
  profile.task_resources = {{"gpu", 1}, {"fpga", 1}, {"licence", 0.5}};
  auto warnings = completeTaskResources(job, profile);
  EXPECT_EQ(profile.task_resources,
            (std::map<std::string, double>{{"fpga", 1}, {"gpu", 1}, {"licence", 0.5}}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("resource_profile.task_resources.gpu is 1, but the job's tasks ask "
                             "for 0.25"),
            std::string::npos)
      << warnings[0];
}

TEST(JobSpecTest, MixedTaskAmountsServeTheSmallestWithAWarning) {
  JobSpec job = parseJobText(R"({"name": "j", "tasks": [{"shell": "a", "resources": {"gpu": 0.5}},
                                                 {"shell": "b", "resources": {"gpu": 0.25}},
                                                 {"shell": "c", "resources": {"gpu": 2}}]})");
  TaskResourceAmounts amounts = taskResourceAmounts(job);
  EXPECT_EQ(amounts.amount.at("gpu"), 0.25);
  EXPECT_EQ(amounts.mixed.at("gpu"), (std::vector<double>{0.25, 0.5, 2}));
  protocol::ResourceProfile profile;
  auto warnings = completeTaskResources(job, profile);
  EXPECT_EQ(profile.task_resources.at("gpu"), 0.25);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("different amounts (0.25, 0.5, 2)"), std::string::npos) << warnings[0];
}

TEST(JobSpecTest, InputsAndOutputsNameBlocks) {
  JobSpec job = parseJobText(R"({"tasks": [
    {"name": "map-0", "shell": "x", "outputs": ["shuffle_0_0_0", "shuffle_0_0_1"]},
    {"name": "reduce-0", "shell": "y", "inputs": ["shuffle_0_0_0"]},
    {"name": "reduce-1", "shell": "y", "inputs": ["shuffle_0_0_1"]}]})");
  EXPECT_EQ(job.tasks[0].outputs, (std::vector<std::string>{"shuffle_0_0_0", "shuffle_0_0_1"}));
  EXPECT_TRUE(job.tasks[0].inputs.empty());
  EXPECT_EQ(job.tasks[2].inputs, std::vector<std::string>{"shuffle_0_0_1"});
}

TEST(JobSpecTest, BlockErrorsNameTheirPath) {
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "a", "outputs": ["rdd_1_1"]},
                                  {"shell": "b", "inputs": ["rdd_1_1", "rdd_9_9"]}]})")
                .find("jobs/test.json: /tasks/1/inputs/1: no task lists block 'rdd_9_9'"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "a", "outputs": ["rdd_1_1"]},
                                  {"shell": "b", "outputs": ["rdd_1_1"]}]})")
                .find("/tasks/1/outputs/0: block 'rdd_1_1' is already an output of task 'task-0'"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "a", "outputs": ["../x"]}]})")
                .find("/tasks/0/outputs/0: '../x' is not a block id"),
            std::string::npos);
  EXPECT_NE(jobErrorOf(R"({"tasks": [{"shell": "a", "outputs": ["rdd_1_1", "rdd_1_1"]}]})")
                .find("/tasks/0/outputs/1: 'rdd_1_1' is listed twice"),
            std::string::npos);
  EXPECT_NE(
      jobErrorOf(R"({"tasks": [{"shell": "a", "inputs": "rdd_1_1"}]})").find("/tasks/0/inputs"),
      std::string::npos);
  EXPECT_NE(
      jobErrorOf(
          R"({"tasks": [{"name": "p", "shell": "a", "inputs": ["rdd_2_2"], "outputs": ["rdd_1_1"]},
                            {"name": "q", "shell": "b", "inputs": ["rdd_1_1"], "outputs": ["rdd_2_2"]}]})")
          .find("a cycle"),
      std::string::npos);
}

TEST(JobSpecTest, BlockIdsAreSafeFileNames) {
  EXPECT_TRUE(isValidBlockId("shuffle_0_3_1"));
  EXPECT_TRUE(isValidBlockId("rdd_4_12"));
  EXPECT_TRUE(isValidBlockId("task_17_summary.csv"));
  EXPECT_FALSE(isValidBlockId(""));
  EXPECT_FALSE(isValidBlockId("shuffle_0_3"));
  EXPECT_FALSE(isValidBlockId("shuffle_0_3_1_2"));
  EXPECT_FALSE(isValidBlockId("shuffle_0_x_1"));
  EXPECT_FALSE(isValidBlockId("rdd_1"));
  EXPECT_FALSE(isValidBlockId("task_1_.hidden"));
  EXPECT_FALSE(isValidBlockId("task_1_a/b"));
  EXPECT_FALSE(isValidBlockId("b0"));
  EXPECT_FALSE(isValidBlockId("task_1_" + std::string(201, 'a')));
}

TEST(JobSpecTest, LoadReportsUnreadableAndInvalidFiles) {
  EXPECT_THROW(loadJobFile("/nonexistent/job.json"), ConfigError);
}

TEST(JobSpecTest, ShippedExamplesParse) {
  for (const char* path :
       {"/examples/wordcount/job.json", "/examples/flaky/job.json",
        "/examples/decommission/job.json", "/examples/jobs/wordcount.json",
        "/examples/jobs/shuffle.json", "/examples/decommission/job-library.json"}) {
    JobSpec job = loadJobFile(std::string(DOCKHAND_SOURCE_DIR) + path);
    EXPECT_FALSE(job.tasks.empty()) << path;
    for (const auto& t : job.tasks) {
      EXPECT_EQ(t.payload.dump().find("${JOB_DIR}"), std::string::npos) << path;
    }
  }
}

}  // namespace
}  // namespace dockhand::driver
