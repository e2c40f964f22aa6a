// Results stored as blocks: a DriverService in this process, a raw WebSocket agent speaking
// the protocol by hand (driver_protocol_fixture.h) and a real HTTP block server on 127.0.0.1
// that serves (or refuses) the result blocks. Every wait is bounded.
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <gtest/gtest.h>

#include "dockhand/driver/driver_service.h"
#include "dockhand/driver/report.h"
#include "dockhand/driver/result_fetcher.h"
#include "driver_protocol_fixture.h"

namespace dockhand::driver {
namespace {

using driver_protocol_fixture::Client;

// Serves GET /blocks/<id> from a map and takes DELETE /blocks/<id> out of it; counts requests.
class FakeBlockServer {
 public:
  FakeBlockServer() {
    socket_ = Poco::Net::ServerSocket(Poco::Net::SocketAddress("127.0.0.1", 0));
    auto* params = new Poco::Net::HTTPServerParams;  // owned by the server
    params->setMaxThreads(4);
    server_ = std::make_unique<Poco::Net::HTTPServer>(new Factory(*this), socket_, params);
    server_->start();
  }
  ~FakeBlockServer() { server_->stopAll(true); }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(socket_.address().port()); }
  void put(const std::string& id, const std::string& bytes) {
    std::lock_guard lock(mutex_);
    blocks_[id] = bytes;
  }
  int requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  int deletes() const {
    std::lock_guard lock(mutex_);
    return deletes_;
  }
  bool has(const std::string& id) const {
    std::lock_guard lock(mutex_);
    return blocks_.count(id) != 0;
  }

 private:
  class Handler : public Poco::Net::HTTPRequestHandler {
   public:
    explicit Handler(FakeBlockServer& owner) : owner_(owner) {}
    void handleRequest(Poco::Net::HTTPServerRequest& request,
                       Poco::Net::HTTPServerResponse& response) override {
      std::string body;
      bool found = false;
      const bool remove = request.getMethod() == Poco::Net::HTTPRequest::HTTP_DELETE;
      {
        std::lock_guard lock(owner_.mutex_);
        ++owner_.requests_;
        if (remove) ++owner_.deletes_;
        const std::string prefix = "/blocks/";
        const std::string& uri = request.getURI();
        if (uri.rfind(prefix, 0) == 0) {
          auto it = owner_.blocks_.find(uri.substr(prefix.size()));
          found = it != owner_.blocks_.end();
          if (found && remove) {
            owner_.blocks_.erase(it);
          } else if (found) {
            body = it->second;
          }
        }
      }
      if (!found) {
        response.setStatus(Poco::Net::HTTPResponse::HTTP_NOT_FOUND);
        body = "no such block";
      } else if (remove) {
        response.setStatus(Poco::Net::HTTPResponse::HTTP_NO_CONTENT);
      }
      response.setContentLength64(static_cast<Poco::Int64>(body.size()));
      response.send() << body;
    }

   private:
    FakeBlockServer& owner_;
  };
  class Factory : public Poco::Net::HTTPRequestHandlerFactory {
   public:
    explicit Factory(FakeBlockServer& owner) : owner_(owner) {}
    Poco::Net::HTTPRequestHandler* createRequestHandler(
        const Poco::Net::HTTPServerRequest&) override {
      return new Handler(owner_);
    }

   private:
    FakeBlockServer& owner_;
  };

  Poco::Net::ServerSocket socket_;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
  mutable std::mutex mutex_;
  std::map<std::string, std::string> blocks_;
  int requests_ = 0;
  int deletes_ = 0;
};

JobSpec oneLibraryTask(int max_attempts) {
  JobSpec job = parseJob(Json::parse(R"({"name": "lib", "aggregate": "sum",
                      "tasks": [{"name": "t", "library": "words", "function": "count"}]})"),
                         "", "/tmp");
  job.max_attempts = max_attempts;
  return job;
}

class DriverResultTest : public ::testing::Test {
 protected:
  // Starts the driver, registers agent "a" (block server at `block_url`) and submits `job`.
  // Returns the first launch's task id.
  std::uint64_t startJob(JobSpec job, const std::string& block_url) {
    DriverConfig config;
    config.heartbeat_interval_ms = 60000;
    config.result_fetch_timeout_ms = 3000;
    service_ = std::make_unique<DriverService>(std::move(config));
    service_->start("127.0.0.1", 0);
    agent_ = std::make_unique<Client>(service_->port());
    EXPECT_EQ(agent_->hello()["ok"], true);
    EXPECT_EQ(agent_->registerAs("a", 2, block_url)["ok"], true);
    agent_->send({{"type", "LaunchedExecutor"}, {"body", {{"executor_id", "a"}}}});
    service_->submit(std::move(job));
    return nextLaunch();
  }

  std::uint64_t nextLaunch() {
    auto frame = agent_->receive();
    if (!frame || (*frame)["type"] != "LaunchTask") {
      ADD_FAILURE() << "expected LaunchTask, got " << (frame ? frame->dump() : "nothing");
      return 0;
    }
    EXPECT_EQ((*frame)["body"]["task"]["runner"], "library");
    return (*frame)["body"]["task"]["task_id"].get<std::uint64_t>();
  }

  // The agent reports block `id` (as stored, `bytes`) and then FINISHED with it as the result.
  void finishWithBlock(std::uint64_t task_id, const std::string& id, const std::string& bytes,
                       const std::string& checksum, bool report = true) {
    if (report) {
      agent_->send({{"type", "UpdateBlockInfo"},
                    {"body",
                     {{"executor_id", "a"},
                      {"added",
                       {{{"id", id},
                         {"size", bytes.size()},
                         {"checksum", checksum},
                         {"executor_id", "a"},
                         {"url", block_url_ + "/blocks/" + id}}}}}}});
    }
    agent_->send({{"type", "StatusUpdate"},
                  {"body",
                   {{"executor_id", "a"},
                    {"task_id", task_id},
                    {"state", "FINISHED"},
                    {"result", {{"block", id}, {"bytes", bytes.size()}, {"duration_ms", 2}}}}}});
  }

  JobState waitForJob() {
    return service_->waitForJob(SteadyClock::now() + std::chrono::seconds(15));
  }
  TaskRecord task() {
    TaskRecord record;
    service_->inspect([&](const Scheduler& s) { record = s.tasks().at(0); });
    return record;
  }
  std::string failureReason() {
    std::string reason;
    service_->inspect([&](const Scheduler& s) { reason = s.failureReason(); });
    return reason;
  }

  void TearDown() override {
    agent_.reset();
    if (service_) service_->stop();
  }

  FakeBlockServer blocks_;
  std::string block_url_ = blocks_.url();
  std::unique_ptr<DriverService> service_;
  std::unique_ptr<Client> agent_;
};

TEST_F(DriverResultTest, FetchesAResultBlockAndTakesItsBytesAsTheValue) {
  const std::uint64_t id = startJob(oneLibraryTask(1), block_url_);
  ASSERT_NE(id, 0u);
  const std::string block = "task_" + std::to_string(id) + "_result";
  const std::string bytes = std::string(100000, ' ') + "406\n";
  blocks_.put(block, bytes);
  finishWithBlock(id, block, bytes, blockChecksum(bytes));

  ASSERT_EQ(waitForJob(), JobState::kSucceeded) << failureReason();
  TaskRecord t = task();
  EXPECT_EQ(t.result["value"], bytes);
  EXPECT_EQ(t.result["block"], block);
  EXPECT_EQ(t.result["bytes"], bytes.size());
  // One GET, then the block is removed on the agent: the driver has its bytes.
  EXPECT_EQ(blocks_.requests(), 2);
  EXPECT_EQ(blocks_.deletes(), 1);
  EXPECT_FALSE(blocks_.has(block));
  SumResult sum = sumResults({t});
  EXPECT_EQ(sum.sum, 406);
}

TEST_F(DriverResultTest, BytesThatAreNotUtf8BecomeBase64) {
  const std::uint64_t id = startJob(oneLibraryTask(1), block_url_);
  const std::string block = "task_" + std::to_string(id) + "_result";
  const std::string bytes("\xff\x00\x01", 3);
  blocks_.put(block, bytes);
  finishWithBlock(id, block, bytes, blockChecksum(bytes));

  ASSERT_EQ(waitForJob(), JobState::kSucceeded) << failureReason();
  TaskRecord t = task();
  EXPECT_FALSE(t.result.contains("value"));
  EXPECT_EQ(t.result["value_base64"], "/wAB");
  EXPECT_NE(formatTaskLine(t, 4).find("base64:/wAB"), std::string::npos) << formatTaskLine(t, 4);
}

TEST_F(DriverResultTest, AChecksumMismatchFailsTheAttemptAndTheRetryCanSucceed) {
  const std::uint64_t first = startJob(oneLibraryTask(2), block_url_);
  const std::string block = "task_" + std::to_string(first) + "_result";
  blocks_.put(block, "the bytez");
  finishWithBlock(first, block, "the bytes", blockChecksum("the bytes"));

  // The failed attempt is retried: a second launch, which finishes with a small result.
  const std::uint64_t second = nextLaunch();
  ASSERT_NE(second, 0u);
  EXPECT_NE(second, first);
  agent_->send({{"type", "StatusUpdate"},
                {"body",
                 {{"executor_id", "a"},
                  {"task_id", second},
                  {"state", "FINISHED"},
                  {"result", {{"value", "7"}, {"bytes", 1}, {"duration_ms", 1}}}}}});
  ASSERT_EQ(waitForJob(), JobState::kSucceeded) << failureReason();
  TaskRecord t = task();
  EXPECT_EQ(t.launches, 2);
  EXPECT_EQ(t.failures, 1);
  EXPECT_EQ(t.result["value"], "7");
}

TEST_F(DriverResultTest, ABadBlockFailsTheTaskWithAClearReason) {
  const std::uint64_t id = startJob(oneLibraryTask(1), block_url_);
  const std::string block = "task_" + std::to_string(id) + "_result";
  blocks_.put(block, "corrupted!");
  finishWithBlock(id, block, "corrupted?", blockChecksum("the bytes"));
  ASSERT_EQ(waitForJob(), JobState::kFailed);
  EXPECT_NE(failureReason().find("could not get its result: result block " + block + " from " +
                                 block_url_ + "/blocks/" + block + ": checksum mismatch"),
            std::string::npos)
      << failureReason();
}

TEST_F(DriverResultTest, AnUnreachableBlockServerFailsTheTask) {
  std::string closed;
  {
    Poco::Net::ServerSocket gone(Poco::Net::SocketAddress("127.0.0.1", 0));
    closed = "http://127.0.0.1:" + std::to_string(gone.address().port());
  }
  block_url_ = closed;
  const std::uint64_t id = startJob(oneLibraryTask(1), closed);
  const std::string block = "task_" + std::to_string(id) + "_result";
  finishWithBlock(id, block, "x", blockChecksum("x"));
  ASSERT_EQ(waitForJob(), JobState::kFailed);
  EXPECT_NE(failureReason().find("result block " + block + " from " + closed), std::string::npos)
      << failureReason();
}

TEST_F(DriverResultTest, AMissingBlockFailsTheTask) {
  const std::uint64_t id = startJob(oneLibraryTask(1), block_url_);
  const std::string block = "task_" + std::to_string(id) + "_result";
  finishWithBlock(id, block, "x", blockChecksum("x"));  // reported, but the server has none
  ASSERT_EQ(waitForJob(), JobState::kFailed);
  EXPECT_NE(failureReason().find("HTTP 404"), std::string::npos) << failureReason();
}

TEST_F(DriverResultTest, ABlockTheAgentDidNotReportFailsTheTaskWithoutAFetch) {
  const std::uint64_t id = startJob(oneLibraryTask(1), block_url_);
  const std::string block = "task_" + std::to_string(id) + "_result";
  blocks_.put(block, "x");
  finishWithBlock(id, block, "x", blockChecksum("x"), /*report=*/false);
  ASSERT_EQ(waitForJob(), JobState::kFailed);
  EXPECT_NE(failureReason().find("which agent 'a' did not report (UpdateBlockInfo)"),
            std::string::npos)
      << failureReason();
  EXPECT_EQ(blocks_.requests(), 0);
}

TEST(ResultBlockTest, TheChecksumIsTheAgentsFormat) {
  EXPECT_EQ(blockChecksum(""), "xxh64:ef46db3751d8e999");
}

}  // namespace
}  // namespace dockhand::driver
