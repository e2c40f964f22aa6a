// The status page's side of the real `dockhand-driver serve`: GET / and its files (static,
// with a strict Content-Security-Policy), and GET /v1/cluster, the JSON the page polls (the
// browser itself is driven by tests/driver/status_page_test.py).
#include <string>

#include <gtest/gtest.h>

#include "dockhand/driver/driver_service.h"
#include "driver_protocol_fixture.h"

namespace {

using namespace driver_protocol_fixture;  // NOLINT(google-build-using-namespace)

struct TextReply {
  int status = 0;
  std::string content_type;
  std::string policy;  // Content-Security-Policy
  std::string body;
};

TextReply httpText(std::uint16_t port, const std::string& method, const std::string& path) {
  Poco::Net::HTTPClientSession session("127.0.0.1", port);
  session.setTimeout(Poco::Timespan(5, 0));
  Poco::Net::HTTPRequest request(method, path, Poco::Net::HTTPMessage::HTTP_1_1);
  request.setContentLength64(0);
  session.sendRequest(request);
  Poco::Net::HTTPResponse response;
  std::istream& in = session.receiveResponse(response);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return {static_cast<int>(response.getStatus()), response.getContentType(),
          response.get("Content-Security-Policy", ""), text};
}

TEST_F(DriverProtocolTest, ServesTheStatusPageAndItsFiles) {
  ASSERT_NO_FATAL_FAILURE(start());
  TextReply page = httpText(port_, "GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.policy.find("default-src 'none'"), std::string::npos) << page.policy;
  EXPECT_NE(page.policy.find("script-src 'self'"), std::string::npos) << page.policy;
  EXPECT_NE(page.body.find(R"(<body data-auth="off">)"), std::string::npos) << page.body;
  EXPECT_NE(page.body.find(R"(<script src="status.js" defer></script>)"), std::string::npos);
  EXPECT_NE(page.body.find("dockhand-driver "), std::string::npos) << "its version";
  EXPECT_EQ(page.body.find("{{"), std::string::npos) << "every placeholder is filled in";

  TextReply script = httpText(port_, "GET", "/status.js");
  EXPECT_EQ(script.status, 200);
  EXPECT_EQ(script.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(script.body.find("v1/cluster"), std::string::npos);
  TextReply style = httpText(port_, "GET", "/status.css");
  EXPECT_EQ(style.status, 200);
  EXPECT_EQ(style.content_type, "text/css; charset=utf-8");
  EXPECT_EQ(httpText(port_, "GET", "/favicon.ico").status, 204);
  EXPECT_EQ(httpText(port_, "POST", "/").status, 405);
  EXPECT_EQ(httpText(port_, "GET", "/other").status, 426) << "anything else wants a WebSocket";
}

TEST_F(DriverProtocolTest, ClusterJsonListsAgentsWithResourcesAndLinks) {
  ASSERT_NO_FATAL_FAILURE(start());
  Client agent(port_);
  ASSERT_EQ(agent.hello()["ok"], true);
  Json reg = agent.ask(
      "RegisterExecutor",
      {{"executor_id", "<b>exec</b>"},
       {"hostname", "127.0.0.1"},
       {"cores", 4},
       {"block_url", "http://127.0.0.1:1001/"},
       {"log_urls", {{"stdout", "http://127.0.0.1:1001/logs/stdout"}, {"bad", "javascript:x"}}},
       {"resources", {{"gpu", {{"name", "gpu"}, {"addresses", {"0", "1"}}}}}}});
  ASSERT_EQ(reg["ok"], true) << reg;

  HttpResult cluster = http(port_, "GET", "/v1/cluster");
  ASSERT_EQ(cluster.status, 200) << cluster.body;
  EXPECT_TRUE(cluster.body["job"].is_null()) << "serve runs no job";
  EXPECT_EQ(cluster.body["auth"]["required"], false);
  ASSERT_EQ(cluster.body["executors"].size(), 1u) << cluster.body;
  const Json& e = cluster.body["executors"][0];
  EXPECT_EQ(e["executor_id"], "<b>exec</b>") << "JSON as registered; the page shows it as text";
  EXPECT_EQ(e["state"], "registered");
  EXPECT_EQ(e["cores"], 4);
  EXPECT_EQ(e["free_cores"], 4);
  EXPECT_EQ(e["tasks_finished"], 0);
  EXPECT_EQ(e["tasks_failed"], 0);
  EXPECT_EQ(e["metrics_url"], "http://127.0.0.1:1001/metrics");
  EXPECT_EQ(e["log_urls"]["stdout"], "http://127.0.0.1:1001/logs/stdout");
  EXPECT_EQ(e["log_urls"]["bad"], "javascript:x") << "filtered by the page, not here";
  EXPECT_EQ(e["resources"]["gpu"]["addresses"], Json::array({"0", "1"}));
  EXPECT_EQ(e["resources"]["gpu"]["in_use"], Json::array());
  EXPECT_TRUE(e["decommission"].is_null());

  // A decommission shows as requested until the agent's heartbeats report its progress.
  ASSERT_EQ(http(port_, "POST", "/v1/executors/%3Cb%3Eexec%3C%2Fb%3E/decommission").status, 200);
  Json requested = http(port_, "GET", "/v1/cluster").body["executors"][0]["decommission"];
  EXPECT_EQ(requested["state"], "requested") << requested;
  agent.send({{"type", "Heartbeat"},
              {"body",
               {{"executor_id", "<b>exec</b>"},
                {"running_tasks", 0},
                {"decommission",
                 {{"state", "migrating"},
                  {"blocks_total", 5},
                  {"blocks_migrated", 2},
                  {"blocks_left", 3},
                  {"bytes_total", 500},
                  {"bytes_migrated", 200}}}}}});
  Json progress;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    progress = http(port_, "GET", "/v1/cluster").body["executors"][0]["decommission"];
    if (progress.value("state", "") == "migrating") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(progress["state"], "migrating") << progress;
  EXPECT_EQ(progress["blocks_total"], 5);
  EXPECT_EQ(progress["blocks_migrated"], 2);
  EXPECT_EQ(progress["blocks_left"], 3);
  EXPECT_EQ(progress["blocks_failed"], 0);
  EXPECT_EQ(progress["bytes_migrated"], 200);
  EXPECT_EQ(http(port_, "POST", "/v1/cluster").status, 405);
}

// In process, without a server: a job larger than the listing's limit.
TEST(ClusterJsonTest, ListsAtMostAThousandTasksAndSaysHowManyItLeftOut) {
  dockhand::driver::DriverService service(dockhand::driver::DriverConfig{});
  dockhand::driver::JobSpec job;
  job.name = "large";
  for (int i = 0; i < 1500; ++i) {
    dockhand::driver::TaskSpec task;
    task.name = "t-" + std::to_string(i);
    task.payload = {{"command", {"/bin/true"}}};
    job.tasks.push_back(task);
  }
  service.submit(job);
  const Json cluster = service.clusterJson();
  const Json& listed = cluster["job"]["tasks"];
  ASSERT_EQ(listed.size(), 1000u);
  EXPECT_EQ(cluster["job"]["tasks_omitted"], 500);
  EXPECT_EQ(cluster["job"]["total"], 1500);
  EXPECT_EQ(listed[0]["name"], "t-0");
  EXPECT_EQ(listed[0]["state"], "PENDING");
  EXPECT_TRUE(listed[0]["duration_ms"].is_null());
  EXPECT_EQ(listed[0]["log_urls"], Json::object()) << "no attempt, no logs";
  EXPECT_EQ(listed[999]["name"], "t-999");
  EXPECT_TRUE(cluster["executors"].empty());
}

}  // namespace
