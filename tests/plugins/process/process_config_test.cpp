// The process runner's config: user, group, environment policy and limits (pure parsing, and
// the passwd/group look-ups of this machine).
#include "process_config.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dockhand/plugin.hpp"
#include "plugins/config_schema.h"

namespace dockhand::plugins::process {
namespace {

using ::testing::HasSubstr;

// The message of the error parsing (and resolving, as `euid`) `config` throws, or "".
std::string errorOf(const std::string& config, uid_t euid = 0, gid_t egid = 0) {
  try {
    resolveIdentity(parseConfig(config), euid, egid);
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.status(), DH_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

TEST(ProcessConfigTest, DefaultsRunAsTheAgentWithItsEnvironment) {
  ProcessConfig config = parseConfig("");
  EXPECT_TRUE(config.user.empty());
  EXPECT_TRUE(config.inherit_env);
  EXPECT_FALSE(config.limits.any());
  EXPECT_FALSE(resolveIdentity(config, 0, 0).has_value());
}

TEST(ProcessConfigTest, UserByNameTakesItsPrimaryGroupAndScrubsTheEnvironment) {
  ProcessConfig config = parseConfig(R"({"user": "nobody"})");
  EXPECT_EQ(config.user, "nobody");
  EXPECT_FALSE(config.inherit_env);
  auto identity = resolveIdentity(config, 0, 0);
  ASSERT_TRUE(identity);
  EXPECT_EQ(identity->uid, 65534u);
  EXPECT_EQ(identity->gid, 65534u);
  EXPECT_EQ(identity->name, "nobody");
  EXPECT_EQ(identity->home, "/nonexistent");
  EXPECT_TRUE(identity->switches);
}

TEST(ProcessConfigTest, UserAndGroupByIdAndByName) {
  auto identity = resolveIdentity(parseConfig(R"({"user": 65534, "group": "root"})"), 0, 0);
  ASSERT_TRUE(identity);
  EXPECT_EQ(identity->uid, 65534u);
  EXPECT_EQ(identity->name, "nobody");
  EXPECT_EQ(identity->gid, 0u);
  // An id with no passwd entry is accepted, with a group given.
  identity = resolveIdentity(parseConfig(R"({"user": "4000123", "group": 4000124})"), 0, 0);
  ASSERT_TRUE(identity);
  EXPECT_EQ(identity->uid, 4000123u);
  EXPECT_EQ(identity->gid, 4000124u);
  EXPECT_EQ(identity->name, "4000123");
  EXPECT_EQ(identity->home, "/");
}

TEST(ProcessConfigTest, UnknownUserOrGroupIsNamed) {
  EXPECT_EQ(errorOf(R"({"user": "dockhand-no-such-user"})"),
            "config/user: no user 'dockhand-no-such-user' on this machine");
  EXPECT_EQ(errorOf(R"({"user": "nobody", "group": "dockhand-no-such-group"})"),
            "config/group: no group 'dockhand-no-such-group' on this machine");
  EXPECT_THAT(errorOf(R"({"user": 4000123})"),
              HasSubstr("config/group: is needed: user 4000123 has no passwd entry"));
  EXPECT_EQ(errorOf(R"({"group": "nogroup"})"),
            "config/group: needs config/user (tasks run as the agent's own user and group)");
  EXPECT_EQ(errorOf(R"({"user": ""})"), "config/user: must be a name or a non-negative integer id");
  EXPECT_EQ(errorOf(R"({"user": -1})"), "config/user: must be a name or a non-negative integer id");
  EXPECT_EQ(errorOf(R"({"user": 4294967295, "group": 1})"),
            "config/user: no user '4294967295' on this machine");
}

TEST(ProcessConfigTest, AnotherUserNeedsARootAgent) {
  EXPECT_EQ(errorOf(R"({"user": "nobody"})", 1000, 1000),
            "config/user: running tasks as user 'nobody' (uid 65534, gid 65534) needs the agent "
            "to run as root; it runs as uid 1000, gid 1000 (leave user and group out to run tasks "
            "as the agent's own user)");
  // The agent's own user is fine without root: nothing changes hands.
  auto identity = resolveIdentity(parseConfig(R"({"user": "nobody"})"), 65534, 65534);
  ASSERT_TRUE(identity);
  EXPECT_FALSE(identity->switches);
  EXPECT_THAT(errorOf(R"({"user": "nobody", "group": "root"})", 65534, 65534),
              HasSubstr("needs the agent to run as root"));
}

TEST(ProcessConfigTest, EnvironmentPolicy) {
  ProcessConfig config =
      parseConfig(R"({"user": "nobody", "env_allow": ["LC_ALL", "HTTP_PROXY"]})");
  EXPECT_FALSE(config.inherit_env);
  EXPECT_EQ(config.env_allow, (std::vector<std::string>{"LC_ALL", "HTTP_PROXY"}));
  EXPECT_FALSE(parseConfig(R"({"inherit_env": false})").inherit_env);
  EXPECT_TRUE(parseConfig(R"({"user": "nobody", "inherit_env": true})").inherit_env);
  EXPECT_EQ(errorOf(R"({"env_allow": ["PATH"]})"),
            "config/env_allow: only applies when the environment is not inherited (set "
            "inherit_env to false)");
  EXPECT_EQ(errorOf(R"({"user": "nobody", "env_allow": ["DOCKHAND_AUTH_SECRET_FILE"]})"),
            "config/env_allow/0: 'DOCKHAND_AUTH_SECRET_FILE' is the agent's own and is never "
            "passed to tasks");
  EXPECT_EQ(errorOf(R"({"inherit_env": false, "env_allow": ["OK", "A=B"]})"),
            "config/env_allow/1: must be a variable name (letters, digits and _, not starting "
            "with a digit)");
  EXPECT_EQ(errorOf(R"({"inherit_env": "no"})"), "config/inherit_env: must be true or false");
  EXPECT_TRUE(isAgentPrivateVariable("DOCKHAND_AUTH_SECRET_FILE"));
  EXPECT_TRUE(isAgentPrivateVariable("NOTIFY_SOCKET"));
  EXPECT_FALSE(isAgentPrivateVariable("PATH"));
}

TEST(ProcessConfigTest, Limits) {
  ProcessConfig config = parseConfig(
      R"({"limits": {"open_files": 1024, "processes": 64, "address_space_bytes": 1073741824,
                     "core_bytes": 0}})");
  EXPECT_EQ(config.limits.open_files, 1024u);
  EXPECT_EQ(config.limits.processes, 64u);
  EXPECT_EQ(config.limits.address_space_bytes, 1073741824u);
  EXPECT_EQ(config.limits.core_bytes, 0u);
  EXPECT_TRUE(config.limits.any());
  EXPECT_EQ(errorOf(R"({"limits": {"open_file": 1}})"),
            "config/limits/open_file: unknown key (known keys: open_files, processes, "
            "address_space_bytes, core_bytes)");
  EXPECT_EQ(errorOf(R"({"limits": {"open_files": 0}})"),
            "config/limits/open_files: must be at least 1");
  EXPECT_EQ(errorOf(R"({"limits": {"processes": -3}})"),
            "config/limits/processes: must be a non-negative integer");
  EXPECT_EQ(errorOf(R"({"limits": {"address_space_bytes": 4096}})"),
            "config/limits/address_space_bytes: must be at least 16777216 (16 MiB): no program "
            "starts with less");
  EXPECT_EQ(errorOf(R"({"limits": []})"), "config/limits: must be an object");
  EXPECT_THAT(errorOf(R"({"usr": "nobody"})"),
              HasSubstr("config/usr: unknown key (known keys: kill_grace_ms, result_limit_bytes, "
                        "stderr_tail_bytes, user, group, inherit_env, env_allow, limits)"));
}

// The schema the host checks before create() and parseConfig accept the same configs, but for
// the rules the schema leaves to parseConfig.
TEST(ProcessConfigTest, SchemaAcceptsWhatParseConfigAccepts) {
  const nlohmann::json schema = nlohmann::json::parse(kProcessConfigSchema);
  auto schema_accepts = [&](const std::string& config) {
    return agent::checkAgainstSchema(nlohmann::json::parse(config), schema).empty();
  };
  auto parses = [](const std::string& config) {
    try {
      parseConfig(config);
      return true;
    } catch (const sdk::Error&) {
      return false;
    }
  };
  for (const char* good : {
           R"({})",
           R"({"kill_grace_ms": 0, "result_limit_bytes": 1073741824, "stderr_tail_bytes": 0})",
           R"({"kill_grace_ms": 86400000, "inherit_env": true})",
           R"({"user": "nobody", "group": "nogroup", "inherit_env": false,
               "env_allow": ["LANG", "_X1"]})",
           R"({"user": 65534, "group": 0})",
           R"({"limits": {"open_files": 1, "processes": 1, "address_space_bytes": 16777216,
                          "core_bytes": 0}})",
           R"({"limits": {"open_files": 1073741824, "processes": 9223372036854775807}})",
       }) {
    EXPECT_TRUE(schema_accepts(good)) << good;
    EXPECT_TRUE(parses(good)) << good;
  }
  for (const char* bad : {
           R"({"kill_grace": 10})",
           R"({"kill_grace_ms": -1})",
           R"({"kill_grace_ms": 86400001})",
           R"({"kill_grace_ms": "5"})",
           R"({"result_limit_bytes": 1073741825})",
           R"({"stderr_tail_bytes": -1})",
           R"({"user": ""})",
           R"({"user": -1})",
           R"({"user": true})",
           R"({"user": "nobody", "group": ""})",
           R"({"inherit_env": "no"})",
           R"({"inherit_env": false, "env_allow": "HOME"})",
           R"({"inherit_env": false, "env_allow": [1]})",
           R"({"inherit_env": false, "env_allow": ["1X"]})",  // the schema's pattern
           R"({"limits": []})",
           R"({"limits": {"open_files": 0}})",
           R"({"limits": {"open_files": 1073741825}})",
           R"({"limits": {"processes": 0}})",
           R"({"limits": {"address_space_bytes": 16777215}})",
           R"({"limits": {"core_bytes": -1}})",
           R"({"limits": {"stack_bytes": 1}})",
       }) {
    EXPECT_FALSE(schema_accepts(bad)) << bad;
    EXPECT_FALSE(parses(bad)) << bad;
  }
  // Left to parseConfig: env_allow only without inheriting and never an agent variable, and
  // group needing user ("dependentRequired", a keyword the agent's checker skips).
  for (const char* parse_refuses : {
           R"({"env_allow": ["HOME"]})",
           R"({"inherit_env": false, "env_allow": ["DOCKHAND_SECRET"]})",
           R"({"group": "root"})",
       }) {
    EXPECT_TRUE(schema_accepts(parse_refuses)) << parse_refuses;
    EXPECT_FALSE(parses(parse_refuses)) << parse_refuses;
  }
}

}  // namespace
}  // namespace dockhand::plugins::process
