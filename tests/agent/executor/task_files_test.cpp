// The task_json a runner gets: what runnerTaskJson puts in it from a TaskDescription.
#include "executor/task_files.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dockhand::agent {
namespace {

using nlohmann::json;

TEST(RunnerTaskJsonTest, ListsInputIdsInTheTasksOrder) {
  protocol::TaskDescription task;
  task.task_id = 7;
  task.inputs = {{"shuffle_0_3_1", "http://a/blocks/shuffle_0_3_1", 10, ""},
                 {"rdd_2_0", "http://b/blocks/rdd_2_0", 4, ""}};
  json launched = runnerTaskJson(task, "/tmp/task-7", "exec-1");
  EXPECT_EQ(launched.at("inputs"), json::array({"shuffle_0_3_1", "rdd_2_0"}));
  EXPECT_EQ(launched.at("work_dir"), "/tmp/task-7");
  EXPECT_EQ(launched.at("env").at("DOCKHAND_INPUT_DIR"), "/tmp/task-7/input");
}

TEST(RunnerTaskJsonTest, InputsIsAnEmptyArrayWithoutInputs) {
  protocol::TaskDescription task;
  task.task_id = 8;
  json launched = runnerTaskJson(task, "/tmp/task-8", "exec-1");
  EXPECT_EQ(launched.at("inputs"), json::array());
}

}  // namespace
}  // namespace dockhand::agent
