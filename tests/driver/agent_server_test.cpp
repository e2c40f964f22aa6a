// AgentServer's connections, over real WebSockets on 127.0.0.1 with a handler written here,
// each test over ws:// and over wss:// (the reactor serves both; the TLS certificates are made
// by the openssl program, and the wss:// runs are skipped without it): the frames the handler
// sends while it handles a frame keep their order beside frames from other threads; frames
// larger than a TLS record arrive whole both ways; an agent that stops reading never stops the
// reactor, nor the other agents; one that never reads is dropped at the queue bound with that
// reason; and many agents take no thread each.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <gtest/gtest.h>

#include "dockhand/driver/agent_server.h"
#include "dockhand/tls/tls.h"
#include "driver_protocol_fixture.h"
#include "support/process.h"
#include "support/test_pki.h"

namespace dockhand::driver {
namespace {

using namespace std::chrono_literals;
using driver_protocol_fixture::Client;
using driver_protocol_fixture::Json;

// Answers every frame {"n": N} with {"reply": N, "pad": "..."} (`reply_bytes` dots; no answer
// when `answer` is false). A
// connection's first frame starts a thread that sends {"other": K} through the same
// connection, K = 0 .. others - 1.
class Echo final : public FrameHandler {
 public:
  Echo(std::size_t reply_bytes, int others, bool answer = true)
      : reply_bytes_(reply_bytes), others_(others), answer_(answer) {}
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
    if (answer_) {
      connection->send(
          Json{{"reply", Json::parse(frame).at("n")}, {"pad", std::string(reply_bytes_, '.')}}
              .dump());
    }
    {
      std::lock_guard lock(mutex_);
      ++handled_;
    }
    changed_.notify_all();
  }
  bool onIdle(const std::shared_ptr<Connection>&) override { return true; }
  void onDropped(const std::shared_ptr<Connection>&, DropReason reason) override {
    std::lock_guard lock(mutex_);
    dropped_.push_back(reason);
  }
  std::vector<DropReason> dropped() {
    std::lock_guard lock(mutex_);
    return dropped_;
  }
  void onClose(const std::shared_ptr<Connection>&, const std::string& why) override {
    {
      std::lock_guard lock(mutex_);
      if (closed_.empty()) handled_at_close_ = handled_;
      closed_.push_back(why);
    }
    changed_.notify_all();
  }

  // The first close reason, once a connection closed; nullopt after `timeout`.
  std::optional<std::string> waitClosed(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return !closed_.empty(); })) return std::nullopt;
    return closed_.front();
  }

  // The frames handled so far.
  int handled() {
    std::lock_guard lock(mutex_);
    return handled_;
  }
  // The frames handled when the first connection closed (-1 while none has).
  int handledAtClose() {
    std::lock_guard lock(mutex_);
    return handled_at_close_;
  }

  // Waits until `count` frames were handled; false after `timeout`.
  bool waitHandled(int count, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return handled_ >= count; });
  }

 private:
  const std::size_t reply_bytes_;
  const int others_;
  const bool answer_;
  std::atomic<int> received_{0};
  std::thread other_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int handled_ = 0;
  int handled_at_close_ = -1;
  std::vector<std::string> closed_;
  std::vector<DropReason> dropped_;
};

// The threads of this process.
std::size_t threadCount() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++n;
  }
  return n;
}

// The transport under test: GetParam() is true for wss://.
class AgentServerTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    if (!testing::TestPki::available()) return;
    gDir = new testing::TempDir;
    gPki = new testing::TestPki(gDir->path() / "pki");
    tls::TlsConfig server;
    server.enabled = true;
    server.certificate_file = gPki->cert("server");
    server.private_key_file = gPki->key("server");
    server.ca_file = gPki->cert("ca");
    gServerContext = new Poco::Net::Context::Ptr(tls::makeContext(server, tls::Role::kServer));
    tls::TlsConfig client;
    client.enabled = true;
    client.ca_file = gPki->cert("ca");
    gClientContext = new Poco::Net::Context::Ptr(tls::makeContext(client, tls::Role::kClient));
  }
  static void TearDownTestSuite() {
    delete gClientContext;
    delete gServerContext;
    delete gPki;
    delete gDir;
    gClientContext = gServerContext = nullptr;
    gPki = nullptr;
    gDir = nullptr;
  }
  void SetUp() override {
    if (GetParam() && gPki == nullptr) GTEST_SKIP() << "the openssl program is not installed";
  }

  static ServerOptions serverOptions() {
    ServerOptions options;
    if (GetParam()) options.tls = *gServerContext;
    return options;
  }
  static std::unique_ptr<Client> connect(std::uint16_t port) {
    return std::make_unique<Client>(port, GetParam() ? *gClientContext : nullptr);
  }

 private:
  static inline testing::TempDir* gDir = nullptr;
  static inline testing::TestPki* gPki = nullptr;
  static inline Poco::Net::Context::Ptr* gServerContext = nullptr;
  static inline Poco::Net::Context::Ptr* gClientContext = nullptr;
};

TEST_P(AgentServerTest, TheReadersFramesAndOtherThreadsFramesEachArriveInOrder) {
  constexpr int kFrames = 2000;
  constexpr int kOthers = 2000;
  Echo handler(0, kOthers);
  AgentServer server(serverOptions(), handler);
  server.start();
  auto client = connect(server.port());
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

TEST_P(AgentServerTest, AnAgentThatStopsReadingDoesNotStopTheReader) {
  // Each reply is 256 KiB: a few fill the socket buffers, and the client reads nothing until
  // every frame it sent was handled.
  constexpr int kFrames = 200;
  Echo handler(std::size_t{256} * 1024, 0);
  AgentServer server(serverOptions(), handler);
  server.start();
  auto client = connect(server.port());
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

TEST_P(AgentServerTest, AnAgentThatReadsNothingDoesNotHoldUpTheOthers) {
  Echo handler(std::size_t{256} * 1024, 0);
  AgentServer server(serverOptions(), handler);
  server.start();
  auto stuck = connect(server.port());
  auto other = connect(server.port());
  for (int i = 0; i < 100; ++i) stuck->send(Json{{"n", i}});
  // Every reply to the other agent comes while the first one's replies wait in its queue.
  for (int i = 0; i < 50; ++i) {
    other->send(Json{{"n", i}});
    const std::optional<Json> frame = other->receive();
    ASSERT_TRUE(frame) << "reply " << i << " to the agent that reads never came";
    ASSERT_EQ(frame->at("reply"), i);
  }
  // Nothing of what waited is lost.
  for (int i = 0; i < 100; ++i) {
    const std::optional<Json> frame = stuck->receive();
    ASSERT_TRUE(frame) << "reply " << i << " never came";
    ASSERT_EQ(frame->at("reply"), i);
  }
  stuck.reset();
  other.reset();
  server.stop();
}

TEST_P(AgentServerTest, AnAgentThatNeverReadsIsDroppedAtTheQueueBound) {
  Echo handler(std::size_t{256} * 1024, 0);
  ServerOptions options = serverOptions();
  options.max_queued_frames = 8;
  AgentServer server(options, handler);
  server.start();
  auto stuck = connect(server.port());
  // The socket buffers and the reactor's own megabyte of unsent bytes take some; then the queue
  // passes its bound and the connection goes, with that reason.
  for (int i = 0; i < 200; ++i) stuck->send(Json{{"n", i}});
  const std::optional<std::string> why = handler.waitClosed(20s);
  ASSERT_TRUE(why) << "a connection that read nothing was kept";
  EXPECT_NE(why->find("frames queued"), std::string::npos) << *why;
  EXPECT_EQ(handler.dropped(), std::vector<DropReason>{DropReason::kStoppedReading});
  stuck.reset();
  server.stop();
}

TEST_P(AgentServerTest, AgentsTakeNoThreadEach) {
  Echo handler(0, 0);
  AgentServer server(serverOptions(), handler);
  server.start();
  std::vector<std::unique_ptr<Client>> agents;
  agents.push_back(connect(server.port()));
  agents.back()->send(Json{{"n", 0}});
  ASSERT_TRUE(agents.back()->receive());
  const std::size_t with_one = threadCount();
  for (int i = 1; i <= 50; ++i) {
    agents.push_back(connect(server.port()));
    agents.back()->send(Json{{"n", i}});
    ASSERT_TRUE(agents.back()->receive()) << "agent " << i;
  }
  // Each upgrade borrows a pool thread and gives it back: 50 more agents, a few threads at most.
  EXPECT_LE(threadCount(), with_one + 4) << "threads with one agent: " << with_one;
  // Every one of them is still served.
  for (std::size_t i = 0; i < agents.size(); ++i) {
    agents[i]->send(Json{{"n", static_cast<int>(i)}});
    const std::optional<Json> frame = agents[i]->receive();
    ASSERT_TRUE(frame) << "agent " << i;
    EXPECT_EQ(frame->at("reply"), static_cast<int>(i));
  }
  agents.clear();
  server.stop();
}

TEST_P(AgentServerTest, ConnectionsThatSendNothingHoldNoThreadAndAreClosed) {
  Echo handler(0, 0);
  AgentServer server(serverOptions(), handler);
  server.start();
  const std::size_t before = threadCount();
  std::vector<Poco::Net::StreamSocket> silent;
  silent.reserve(40);  // over wss:// too: no ClientHello, no handshake
  for (int i = 0; i < 40; ++i) {
    silent.emplace_back(Poco::Net::SocketAddress("127.0.0.1", server.port()));
  }
  // An agent that speaks is served at once, beside forty that say nothing.
  auto agent = connect(server.port());
  agent->send(Json{{"n", 7}});
  const std::optional<Json> reply = agent->receive();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->at("reply"), 7);
  EXPECT_LE(threadCount(), before + 4) << "the silent connections took threads";
  // The server's HTTP timeout (10 s) closes them: a read sees the end.
  silent.front().setReceiveTimeout(Poco::Timespan(20, 0));
  char byte = 0;
  int got = -1;
  try {
    got = silent.front().receiveBytes(&byte, 1);
  } catch (const Poco::Exception&) {
    got = 0;  // reset: closed too
  }
  EXPECT_EQ(got, 0) << "a connection that sent nothing was kept past the timeout";
  agent.reset();
  server.stop();
}

TEST_P(AgentServerTest, FramesLargerThanATlsRecordArriveWholeBothWays) {
  // 300 KiB each way: about twenty TLS records a frame, more than a socket buffer holds.
  constexpr std::size_t kPad = std::size_t{300} * 1024;
  constexpr int kFrames = 20;
  Echo handler(kPad, 0);
  AgentServer server(serverOptions(), handler);
  server.start();
  auto client = connect(server.port());
  for (int i = 0; i < kFrames; ++i) {
    client->send(Json{{"n", i}, {"pad", std::string(kPad, std::to_string(i % 10).front())}});
  }
  for (int i = 0; i < kFrames; ++i) {
    const std::optional<Json> frame = client->receive();
    ASSERT_TRUE(frame) << "reply " << i << " never came";
    ASSERT_EQ(frame->at("reply"), i);
    ASSERT_EQ(frame->at("pad").get<std::string>(), std::string(kPad, '.'));
  }
  client.reset();
  server.stop();
}

TEST_P(AgentServerTest, FramesSentJustBeforeTheAgentClosesAreAllHandled) {
  // More frames than the reactor handles of one connection in a turn, then the connection's
  // end: the frames come first, whatever read brought the end. (The handler does not answer: a
  // client that closes with answers unread resets the connection, and the kernel drops what
  // the driver had not read yet.)
  constexpr int kFrames = 300;
  Echo handler(0, 0, /*answer=*/false);
  AgentServer server(serverOptions(), handler);
  server.start();
  auto client = connect(server.port());
  for (int i = 0; i < kFrames; ++i) client->send(Json{{"n", i}});
  client.reset();
  ASSERT_TRUE(handler.waitClosed(10s)) << "the connection's end was not seen";
  EXPECT_EQ(handler.handledAtClose(), kFrames) << "frames were dropped with the connection";
  EXPECT_EQ(handler.handled(), kFrames);
  server.stop();
}

TEST_P(AgentServerTest, AnOversizedFrameIsRefusedAndOnlyItsConnectionCloses) {
  Echo handler(0, 0);
  ServerOptions options = serverOptions();
  options.max_frame_bytes = 4096;
  AgentServer server(options, handler);
  server.start();
  auto big = connect(server.port());
  auto bystander = connect(server.port());
  // 64 KiB: over TLS several records, the rest still arriving while the refusal goes out.
  big->sendText(std::string(std::size_t{64} * 1024, 'x'));
  const std::optional<Json> error = big->receive();
  ASSERT_TRUE(error) << "no refusal came";
  EXPECT_EQ(driver_protocol_fixture::errorCode(*error), "frame_too_large") << error->dump();
  EXPECT_TRUE(big->closedByPeer());
  EXPECT_EQ(handler.dropped(), std::vector<DropReason>{DropReason::kFrameTooLarge});
  bystander->send(Json{{"n", 1}});
  const std::optional<Json> reply = bystander->receive();
  ASSERT_TRUE(reply) << "the other connection was not served";
  EXPECT_EQ(reply->at("reply"), 1);
  big.reset();
  bystander.reset();
  server.stop();
}

TEST_P(AgentServerTest, AnAgentThatGoesWhileAnswersAreWrittenEndsOnlyItsConnection) {
  // Answers of 256 KiB to an agent that has gone: the writes fail (over TLS OpenSSL writes
  // with write(2), which raises SIGPIPE in a process that does not ignore it, as this one).
  Echo handler(std::size_t{256} * 1024, 0);
  AgentServer server(serverOptions(), handler);
  server.start();
  auto gone = connect(server.port());
  for (int i = 0; i < 20; ++i) gone->send(Json{{"n", i}});
  gone.reset();
  ASSERT_TRUE(handler.waitClosed(20s)) << "the connection's end was not seen";
  auto other = connect(server.port());
  other->send(Json{{"n", 5}});
  const std::optional<Json> reply = other->receive();
  ASSERT_TRUE(reply) << "the server stopped serving";
  EXPECT_EQ(reply->at("reply"), 5);
  other.reset();
  server.stop();
}

// Over wss:// only.
class AgentServerTlsTest : public AgentServerTest {};

TEST_P(AgentServerTlsTest, AClientThatStallsInTheHandshakeIsClosedAndHoldsUpNoOne) {
  Echo handler(0, 0);
  AgentServer server(serverOptions(), handler);
  server.start();
  // The header of a TLS handshake record of 128 bytes, and 10 of them: the server's handshake
  // waits for the rest, which never comes, until the server's HTTP timeout (10 s).
  Poco::Net::StreamSocket stalled(Poco::Net::SocketAddress("127.0.0.1", server.port()));
  const std::string partial = std::string("\x16\x03\x01\x00\x80", 5) + std::string(10, '\x01');
  stalled.sendBytes(partial.data(), static_cast<int>(partial.size()));
  // Meanwhile an agent is served as usual.
  auto agent = connect(server.port());
  agent->send(Json{{"n", 3}});
  const std::optional<Json> reply = agent->receive();
  ASSERT_TRUE(reply) << "an agent was held up by a stalled handshake";
  EXPECT_EQ(reply->at("reply"), 3);
  // The stalled one is closed once its handshake's time is up: a read sees the end.
  stalled.setReceiveTimeout(Poco::Timespan(30, 0));
  char byte = 0;
  int got = -1;
  try {
    got = stalled.receiveBytes(&byte, 1);
  } catch (const Poco::TimeoutException&) {
    got = -1;
  } catch (const Poco::Exception&) {
    got = 0;  // reset: closed too
  }
  EXPECT_EQ(got, 0) << "a stalled handshake was kept past its timeout";
  agent.reset();
  server.stop();
}

INSTANTIATE_TEST_SUITE_P(Tls, AgentServerTlsTest, ::testing::Values(true),
                         [](const ::testing::TestParamInfo<bool>&) { return std::string("wss"); });

INSTANTIATE_TEST_SUITE_P(Transports, AgentServerTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& transport) {
                           return std::string(transport.param ? "wss" : "ws");
                         });

}  // namespace
}  // namespace dockhand::driver
