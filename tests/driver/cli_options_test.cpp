#include "dockhand/driver/cli_options.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dockhand/driver/defaults.h"

namespace dockhand::driver {
namespace {

CliOptions parseArgs(std::vector<std::string> args) {
  args.insert(args.begin(), "dockhand-driver");
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) argv.push_back(arg.data());
  return parseCliArgs(static_cast<int>(argv.size()), argv.data());
}

std::string usageErrorOf(std::vector<std::string> args) {
  try {
    parseArgs(std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CliOptionsTest, RunTakesItsJobFileAndOptionsInBothSpellings) {
  CliOptions o = parseArgs({"run", "job.json", "--local-agents", "3", "--cores=4", "--listen",
                            "[::1]:7077", "--timeout", "30", "-q"});
  EXPECT_EQ(o.command, "run");
  EXPECT_EQ(o.job_file, "job.json");
  EXPECT_EQ(o.local_agents, 3);
  EXPECT_EQ(o.cores, 4);
  EXPECT_EQ(o.listen.host, "::1");
  EXPECT_EQ(o.listen.port, 7077);
  ASSERT_TRUE(o.timeout_s.has_value());
  EXPECT_EQ(*o.timeout_s, 30);
  EXPECT_TRUE(o.quiet);
  EXPECT_FALSE(o.min_agents.has_value());
}

TEST(CliOptionsTest, DefaultsWithoutOptions) {
  CliOptions o = parseArgs({"serve"});
  EXPECT_EQ(o.command, "serve");
  EXPECT_EQ(o.listen.host, "127.0.0.1");
  EXPECT_EQ(o.listen.port, 0);
  EXPECT_EQ(o.local_agents, 2);
  EXPECT_EQ(o.cores, 2);
  EXPECT_EQ(o.reason, "dockhand-driver decommission");
}

TEST(CliOptionsTest, HelpAndVersionSkipEveryOtherCheck) {
  EXPECT_TRUE(parseArgs({"--help"}).help);
  EXPECT_TRUE(parseArgs({"-h", "bogus-command"}).help);
  EXPECT_TRUE(parseArgs({"--version"}).version);
}

TEST(CliOptionsTest, DecommissionNeedsAnIdAndTheDriver) {
  CliOptions o = parseArgs(
      {"decommission", "exec-1", "--driver", "127.0.0.1:9000", "--reason", "maintenance"});
  EXPECT_EQ(o.command, "decommission");
  EXPECT_EQ(o.decommission_id, "exec-1");
  EXPECT_EQ(o.driver, "127.0.0.1:9000");
  EXPECT_EQ(o.reason, "maintenance");
  EXPECT_EQ(usageErrorOf({"decommission", "exec-1"}), "decommission needs --driver HOST:PORT");
  EXPECT_EQ(usageErrorOf({"decommission", "--driver", "h:1"}),
            "decommission takes exactly one executor id");
  EXPECT_EQ(usageErrorOf({"decommission", "x", "--driver", "nohost"}),
            "--listen expects HOST:PORT, got 'nohost'");
}

TEST(CliOptionsTest, OptionsOfAnotherCommandAreRefused) {
  EXPECT_EQ(usageErrorOf({"serve", "--cores", "2"}), "--cores is an option of run, not serve");
  EXPECT_EQ(usageErrorOf({"run", "job.json", "--driver=h:1"}),
            "--driver is an option of decommission, not run");
  EXPECT_EQ(usageErrorOf({"decommission", "x", "--driver", "h:1", "--port-file", "f"}),
            "--port-file is an option of run or serve, not decommission");
}

TEST(CliOptionsTest, BadValuesAreUsageErrors) {
  EXPECT_EQ(usageErrorOf({"run", "j", "--cores", "0"}),
            "--cores expects a whole number in [1, 4096], got '0'");
  EXPECT_EQ(usageErrorOf({"run", "j", "--listen", "h:70000"}),
            "--listen: '70000' is not a port (0-65535)");
  EXPECT_EQ(usageErrorOf({"run", "j", "--quiet=yes"}), "--quiet takes no value");
  EXPECT_EQ(usageErrorOf({"run", "j", "--config"}), "--config needs a value");
  EXPECT_EQ(usageErrorOf({"run", "j", "--log-level", "loud"}), "--log-level: unknown level 'loud'");
  EXPECT_EQ(usageErrorOf({"serve", "--log-format", "xml"}),
            "--log-format: unknown format 'xml' (text or json)");
  EXPECT_EQ(usageErrorOf({"run", "j", "--frobnicate"}), "unknown option '--frobnicate'");
  EXPECT_EQ(usageErrorOf({"run", "j", "--decommission-after-ms", "5"}),
            "--decommission-after-ms needs --decommission EXECUTOR_ID");
}

TEST(CliOptionsTest, LogFormatIsTextUnlessAsked) {
  EXPECT_EQ(parseArgs({"serve"}).log_format, "text");
  EXPECT_FALSE(parseArgs({"serve"}).log_format_given);
  EXPECT_TRUE(parseArgs({"run", "job.json", "--log-format", "text"}).log_format_given);
  EXPECT_EQ(parseArgs({"serve", "--log-format", "json"}).log_format, "json");
  EXPECT_EQ(parseArgs({"run", "job.json", "--log-format=JSON"}).log_format, "JSON");
}

TEST(CliOptionsTest, MissingOrUnknownCommand) {
  EXPECT_EQ(usageErrorOf({}), "missing command (run, serve, decommission, fetch or report)");
  EXPECT_EQ(usageErrorOf({"launch"}),
            "unknown command 'launch' (expected run, serve, decommission, fetch or report)");
  EXPECT_EQ(usageErrorOf({"run"}), "run takes exactly one job file");
  EXPECT_EQ(usageErrorOf({"serve", "extra"}), "serve takes no arguments");
}

TEST(CliOptionsTest, ReportTakesOneEventLogAndAnHtmlFile) {
  const CliOptions o = parseArgs({"report", "e.jsonl", "--html", "t.html"});
  EXPECT_EQ(o.command, "report");
  EXPECT_EQ(o.event_log, "e.jsonl");
  EXPECT_EQ(o.html, "t.html");
  EXPECT_EQ(parseArgs({"run", "job.json", "--event-log", "e.jsonl"}).event_log, "e.jsonl");
  EXPECT_EQ(parseArgs({"serve", "--event-log", "e.jsonl"}).event_log, "e.jsonl");
  EXPECT_EQ(usageErrorOf({"report"}), "report takes exactly one event log");
  EXPECT_EQ(usageErrorOf({"run", "job.json", "--html", "t.html"}),
            "--html is an option of report, not run");
  EXPECT_EQ(usageErrorOf({"report", "e.jsonl", "--local-agents", "2"}),
            "--local-agents is an option of run or serve, not report");
  EXPECT_EQ(usageErrorOf({"fetch", "http://h:1/", "--event-log", "e.jsonl"}),
            "--event-log is an option of run or serve, not fetch");
}

TEST(CliOptionsTest, DecommissionMayWaitWithinATimeout) {
  const CliOptions o =
      parseArgs({"decommission", "exec-1", "--driver", "h:1", "--wait", "--timeout", "60"});
  EXPECT_TRUE(o.wait);
  EXPECT_EQ(o.timeout_s, 60);
  EXPECT_FALSE(parseArgs({"decommission", "exec-1", "--driver", "h:1"}).wait);
  EXPECT_EQ(usageErrorOf({"decommission", "exec-1", "--driver", "h:1", "--timeout", "5"}),
            "--timeout of decommission needs --wait");
  EXPECT_EQ(usageErrorOf({"run", "job.json", "--wait"}),
            "--wait is an option of decommission, not run");
}

TEST(CliOptionsTest, FetchTakesOneUrlAndTheClustersSettings) {
  const CliOptions o = parseArgs({"fetch", "http://10.0.0.7:7337/v1/logs/agent/stderr", "--config",
                                  "driver.json", "--auth-secret-file", "secret"});
  EXPECT_EQ(o.command, "fetch");
  EXPECT_EQ(o.fetch_url, "http://10.0.0.7:7337/v1/logs/agent/stderr");
  EXPECT_EQ(o.config_file, "driver.json");
  EXPECT_EQ(o.auth_secret_file, "secret");
  EXPECT_EQ(usageErrorOf({"fetch"}), "fetch takes exactly one URL");
  EXPECT_EQ(usageErrorOf({"fetch", "http://a:1/x", "http://b:2/y"}), "fetch takes exactly one URL");
  EXPECT_EQ(usageErrorOf({"fetch", "http://a:1/x", "--local-agents", "2"}),
            "--local-agents is an option of run or serve, not fetch");
}

TEST(CliOptionsTest, UsageNamesEveryCommand) {
  const std::string usage(cliUsage());
  EXPECT_EQ(usage.rfind("usage: dockhand-driver", 0), 0u);
  for (const char* command :
       {"run JOB.json", "serve [options]", "decommission EXECUTOR_ID", "fetch URL"}) {
    EXPECT_NE(usage.find(command), std::string::npos) << command;
  }
}

}  // namespace
}  // namespace dockhand::driver

namespace dockhand::driver {
namespace {

TEST(CliOptionsTest, LaunchAheadIsANumberOfCoresOrAuto) {
  EXPECT_FALSE(parseArgs({"run", "job.json"}).launch_ahead.has_value());
  EXPECT_EQ(parseArgs({"run", "job.json", "--launch-ahead", "4"}).launch_ahead, 4);
  EXPECT_EQ(parseArgs({"serve", "--launch-ahead", "0"}).launch_ahead, 0);
  EXPECT_EQ(parseArgs({"serve", "--launch-ahead", "auto"}).launch_ahead,
            defaults::kLaunchAheadAuto);
  EXPECT_NE(usageErrorOf({"run", "job.json", "--launch-ahead", "-1"}).find("--launch-ahead"),
            std::string::npos);
  EXPECT_EQ(usageErrorOf({"run", "job.json", "--launch-ahead", "some"}),
            "--launch-ahead expects auto or a whole number in [0, 4096], got 'some'");
}

}  // namespace
}  // namespace dockhand::driver
