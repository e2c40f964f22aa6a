#include "dockhand/driver/job_spec.h"

#include <gtest/gtest.h>

namespace dockhand::driver {
namespace {

JobSpec parse(const std::string& text) {
  return parseJob(Json::parse(text), "jobs/test.json", "/abs/jobs");
}

std::string errorOf(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(JobSpecTest, ShellAndCommandBecomePayloadWithJobDirSubstituted) {
  JobSpec job = parse(R"({"name": "wc", "aggregate": "sum", "max_attempts": 2,
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
  EXPECT_EQ(parse(R"({"tasks": [{"shell": "true"}]})").name, "test");
}

TEST(JobSpecTest, ErrorsNameTheFileAndJsonPath) {
  EXPECT_EQ(errorOf(R"({"tasks": [{"shell": "true", "cpu": 1}]})")
                .rfind("jobs/test.json: /tasks/0/cpu: unknown key", 0),
            0u)
      << errorOf(R"({"tasks": [{"shell": "true", "cpu": 1}]})");
  EXPECT_NE(errorOf(R"({"tasks": [{"shell": "true", "cpus": 0}]})").find("/tasks/0/cpus"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"tasks": []})").find("/tasks: must be a non-empty array"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"tasks": [{"name": "x"}]})").find("exactly one of"), std::string::npos);
  EXPECT_NE(errorOf(R"({"tasks": [{"shell": "a", "command": ["b"]}]})").find("exactly one of"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"aggregate": "avg", "tasks": [{"shell": "a"}]})").find("/aggregate"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"tasks": [{"name": "a", "shell": "a"}, {"name": "a", "shell": "b"}]})")
                .find("/tasks/1/name: duplicate task name 'a'"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"tasks": [{"shell": "a", "resources": {"gpu": "1"}}]})")
                .find("/tasks/0/resources/gpu"),
            std::string::npos);
  EXPECT_NE(errorOf(R"([1])").find("jobs/test.json: /: expected an object"), std::string::npos);
}

TEST(JobSpecTest, LoadReportsUnreadableAndInvalidFiles) {
  EXPECT_THROW(loadJobFile("/nonexistent/job.json"), ConfigError);
}

TEST(JobSpecTest, ShippedExamplesParse) {
  for (const char* path : {"/examples/wordcount/job.json", "/examples/flaky/job.json"}) {
    JobSpec job = loadJobFile(std::string(DOCKHAND_SOURCE_DIR) + path);
    EXPECT_FALSE(job.tasks.empty()) << path;
    for (const auto& t : job.tasks) {
      EXPECT_EQ(t.payload.dump().find("${JOB_DIR}"), std::string::npos) << path;
    }
  }
}

}  // namespace
}  // namespace dockhand::driver
