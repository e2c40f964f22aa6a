// AgentServer's sending, over a real WebSocket on 127.0.0.1 with a handler written here: the
// frames a connection's reader sends (which it writes itself) keep their order beside frames
// from other threads (which the writer thread writes), and an agent that stops reading never
// stops the reader.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dockhand/driver/agent_server.h"
#include "driver_protocol_fixture.h"

namespace dockhand::driver {
namespace {

using namespace std::chrono_literals;
using driver_protocol_fixture::Client;
using driver_protocol_fixture::Json;

// Answers every frame {"n": N} with {"reply": N, "pad": "..."} (`reply_bytes` dots). A
// connection's first frame starts a thread that sends {"other": K} through the same
// connection, K = 0 .. others - 1.
class Echo final : public FrameHandler {
 public:
  Echo(std::size_t reply_bytes, int others) : reply_bytes_(reply_bytes), others_(others) {}
  ~Echo() override {
    if (other_.joinable()) other_.join();
  }

  void onOpen(const std::shared_ptr<Connection>& connection) override { connection->markGreeted(); }
  void onFrame(const std::shared_ptr<Connection>& connection, std::string_view frame) override {
    if (received_.fetch_add(1) == 0 && others_ > 0) {
      other_ = std::thread([connection, n = others_] {
        for (int k = 0; k < n; ++k) connection->send(Json{{"other", k}}.dump());
      });
    }
    connection->send(
        Json{{"reply", Json::parse(frame).at("n")}, {"pad", std::string(reply_bytes_, '.')}}
            .dump());
    {
      std::lock_guard lock(mutex_);
      ++handled_;
    }
    changed_.notify_all();
  }
  bool onIdle(const std::shared_ptr<Connection>&) override { return true; }
  void onClose(const std::shared_ptr<Connection>&, const std::string&) override {}

  // Waits until `count` frames were handled; false after `timeout`.
  bool waitHandled(int count, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return handled_ >= count; });
  }

 private:
  const std::size_t reply_bytes_;
  const int others_;
  std::atomic<int> received_{0};
  std::thread other_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int handled_ = 0;
};

TEST(AgentServerTest, TheReadersFramesAndOtherThreadsFramesEachArriveInOrder) {
  constexpr int kFrames = 2000;
  constexpr int kOthers = 2000;
  Echo handler(0, kOthers);
  AgentServer server(ServerOptions{}, handler);
  server.start();
  auto client = std::make_unique<Client>(server.port());
  for (int i = 0; i < kFrames; ++i) client->send(Json{{"n", i}});
  int next_reply = 0;
  int next_other = 0;
  while (next_reply < kFrames || next_other < kOthers) {
    const std::optional<Json> frame = client->receive();
    ASSERT_TRUE(frame) << "after " << next_reply << " replies, " << next_other << " others";
    if (frame->contains("reply")) {
      ASSERT_EQ(frame->at("reply"), next_reply);
      ++next_reply;
    } else {
      ASSERT_EQ(frame->at("other"), next_other);
      ++next_other;
    }
  }
  client.reset();  // the agent goes: the server need not wait for it to answer a close
  server.stop();
}

TEST(AgentServerTest, AnAgentThatStopsReadingDoesNotStopTheReader) {
  // Each reply is 256 KiB: a few fill the socket buffers, and the client reads nothing until
  // every frame it sent was handled.
  constexpr int kFrames = 200;
  Echo handler(std::size_t{256} * 1024, 0);
  AgentServer server(ServerOptions{}, handler);
  server.start();
  auto client = std::make_unique<Client>(server.port());
  for (int i = 0; i < kFrames; ++i) client->send(Json{{"n", i}});
  EXPECT_TRUE(handler.waitHandled(kFrames, 20s))
      << "the reader stopped while the agent read nothing";
  for (int i = 0; i < kFrames; ++i) {
    const std::optional<Json> frame = client->receive();
    ASSERT_TRUE(frame) << "reply " << i << " never came";
    ASSERT_EQ(frame->at("reply"), i);
    ASSERT_EQ(frame->at("pad").get<std::string>().size(), std::size_t{256} * 1024);
  }
  client.reset();
  server.stop();
}

}  // namespace
}  // namespace dockhand::driver
