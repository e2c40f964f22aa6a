// The session file (app/agent_session.h): what lets an agent's next process resume its driver
// session. It round-trips; a torn, foreign or newer-format file is a clear error naming the
// file, never a session.
#include "app/agent_session.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class AgentSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dockhand-session-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { fs::remove_all(dir); }
  void write(const std::string& text) { std::ofstream(sessionPath(dir)) << text; }
  std::string errorOf() {
    auto read = readSession(sessionPath(dir));
    EXPECT_FALSE(read.ok());
    return read ? std::string() : read.error().message;
  }
  fs::path dir;
};

AgentSession sample() {
  AgentSession s;
  s.app_id = "app-1";
  s.executor_id = "exec-3";
  s.driver_url = "ws://127.0.0.1:7077/";
  s.pid = 4242;
  s.written_unix_ms = 1800000000000;
  s.agent_version = "0.1.0";
  return s;
}

// A session written by a restart in place: the tasks handed over to the next program.
AgentSession withTasks() {
  AgentSession s = sample();
  s.tasks.push_back(
      HandedOverTask{7, "process", {{"pid", 100}, {"start_ticks", 5}}, 2, {{"gpu", {"0", "1"}}}});
  s.tasks.push_back(HandedOverTask{9, "process", {{"pid", 101}}, 1, {}});
  return s;
}

TEST_F(AgentSessionTest, RoundTrips) {
  ASSERT_TRUE(writeSession(sessionPath(dir), sample()).ok());
  auto read = readSession(sessionPath(dir));
  ASSERT_TRUE(read.ok()) << read.error().message;
  ASSERT_TRUE(read->has_value());
  const AgentSession& s = **read;
  EXPECT_EQ(s.app_id, "app-1");
  EXPECT_EQ(s.executor_id, "exec-3");
  EXPECT_EQ(s.driver_url, "ws://127.0.0.1:7077/");
  EXPECT_EQ(s.pid, 4242u);
  EXPECT_EQ(s.written_unix_ms, 1800000000000u);
  EXPECT_EQ(s.agent_version, "0.1.0");
  EXPECT_TRUE(sameSession(s, "app-1", "exec-3", "ws://127.0.0.1:7077/"));
  EXPECT_FALSE(sameSession(s, "app-1", "exec-4", "ws://127.0.0.1:7077/"));
  EXPECT_FALSE(sameSession(s, "app-2", "exec-3", "ws://127.0.0.1:7077/"));
  EXPECT_FALSE(sameSession(s, "app-1", "exec-3", "ws://127.0.0.1:7078/"));
  EXPECT_FALSE(fs::exists(sessionPath(dir).string() + ".new")) << "the temporary file is gone";
  EXPECT_EQ(fs::status(sessionPath(dir)).permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(AgentSessionTest, TheTasksHandedOverRoundTripAndNoneIsNoMember) {
  ASSERT_TRUE(writeSession(sessionPath(dir), withTasks()).ok());
  auto read = readSession(sessionPath(dir));
  ASSERT_TRUE(read.ok()) << read.error().message;
  const auto& tasks = (*read)->tasks;
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].task_id, 7u);
  EXPECT_EQ(tasks[0].runner, "process");
  EXPECT_EQ(tasks[0].handle, (nlohmann::json{{"pid", 100}, {"start_ticks", 5}}));
  EXPECT_EQ(tasks[0].cpus, 2);
  EXPECT_EQ(tasks[0].resources.at("gpu"), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(tasks[1].task_id, 9u);
  EXPECT_TRUE(tasks[1].resources.empty());

  ASSERT_TRUE(writeSession(sessionPath(dir), sample()).ok());
  std::ifstream in(sessionPath(dir));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::Not(HasSubstr("tasks"))) << "read by an agent that knows none";
}

TEST_F(AgentSessionTest, AMalformedTaskListIsAClearError) {
  for (const char* tasks : {R"("tasks": 3)", R"("tasks": [{"task_id": 1}])",
                            R"("tasks": [{"task_id": "x", "runner": "p", "handle": {}}])"}) {
    write(std::string(R"({"format": "dockhand-session", "version": 1, "app_id": "a",
                          "executor_id": "e", "driver_url": "ws://h:1/", )") +
          tasks + "}");
    EXPECT_THAT(errorOf(), HasSubstr("missing or of the wrong type")) << tasks;
  }
}

TEST_F(AgentSessionTest, NoFileIsNoSessionAndRemovingItTwiceIsFine) {
  auto read = readSession(sessionPath(dir));
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->has_value());
  ASSERT_TRUE(writeSession(sessionPath(dir), sample()).ok());
  EXPECT_TRUE(removeSession(sessionPath(dir)).ok());
  EXPECT_TRUE(removeSession(sessionPath(dir)).ok());
  EXPECT_FALSE(fs::exists(sessionPath(dir)));
}

TEST_F(AgentSessionTest, ALaterMinorVersionsExtraMembersAreIgnored) {
  write(R"({"format": "dockhand-session", "version": 1, "app_id": "a", "executor_id": "e",
            "driver_url": "ws://h:1/", "later_list": [1, 2], "something_new": {"x": 1}})");
  auto read = readSession(sessionPath(dir));
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ((*read)->executor_id, "e");
}

TEST_F(AgentSessionTest, TornForeignAndNewerFilesAreClearErrors) {
  write(R"({"format": "dockhand-session", "version": 1, "app_id": "a", "exec)");
  EXPECT_THAT(errorOf(), HasSubstr("torn or damaged"));
  EXPECT_THAT(errorOf(), HasSubstr(sessionPath(dir).string()));

  write("");
  EXPECT_THAT(errorOf(), HasSubstr("torn or damaged"));

  write(R"({"format": "something-else", "version": 1})");
  EXPECT_THAT(errorOf(), HasSubstr("\"format\" is not \"dockhand-session\""));

  write(R"({"format": "dockhand-session", "version": 2, "app_id": "a", "executor_id": "e",
            "driver_url": "ws://h:1/"})");
  EXPECT_THAT(errorOf(), HasSubstr("session format 2"));
  EXPECT_THAT(errorOf(), HasSubstr("reads format 1"));

  write(R"({"format": "dockhand-session", "version": 1, "app_id": "a", "driver_url": "x"})");
  EXPECT_THAT(errorOf(), HasSubstr("missing or of the wrong type"));

  write(R"({"format": "dockhand-session", "version": 1, "app_id": "a", "executor_id": 7,
            "driver_url": "x"})");
  EXPECT_THAT(errorOf(), HasSubstr("missing or of the wrong type"));

  setSessionAside(sessionPath(dir));
  EXPECT_FALSE(fs::exists(sessionPath(dir)));
  EXPECT_TRUE(fs::exists(sessionPath(dir).string() + ".unusable"));
}

TEST_F(AgentSessionTest, AnUnwritableDirectoryIsAnErrorNamingTheFile) {
  auto written = writeSession(dir / "missing" / "session.json", sample());
  ASSERT_FALSE(written.ok());
  EXPECT_THAT(written.error().message, HasSubstr("missing/session.json"));
}

}  // namespace
}  // namespace dockhand::agent
