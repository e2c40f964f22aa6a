// Unit tests of WebSocketLink against a small driver written here with Poco's HTTPServer on
// 127.0.0.1 (port 0): the Hello handshake, frames to the listener, asks answered and timed
// out, a malformed frame answered with an Error, a lost connection, and close().
//
// The test thread plays the core thread: the link posts its events to a queue the test runs
// (PostedEvents), so every listener callback and ask callback runs on the test thread; with
// read_on_core_thread the test thread reads the socket too, so a test runs it until the link
// has answered. Every wait has a deadline.
#include "rpc/websocket_link.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <Poco/Buffer.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/WebSocket.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dockhand/net/websocket_frames.h"
#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::agent {
namespace {

namespace proto = dockhand::protocol;
using Poco::Net::WebSocket;
using ::testing::HasSubstr;

constexpr Millis kDeadline{10000};

// The link's EventSink: closures wait here until the test thread runs them, and a descriptor
// the link watches is read on the test thread when it becomes readable (as EventLoop does).
class PostedEvents final : public EventSink {
 public:
  PostedEvents() : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~PostedEvents() override { ::close(wake_fd_); }
  PostedEvents(const PostedEvents&) = delete;
  PostedEvents& operator=(const PostedEvents&) = delete;

  void post(std::function<void()> event) override {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(event));
    }
    wake();
  }
  bool watch(int fd, std::function<void()> on_readable) override {
    {
      std::lock_guard lock(mutex_);
      watched_fd_ = fd;
      on_readable_ = std::move(on_readable);
    }
    wake();
    return true;
  }
  void unwatch(int fd) override {
    std::lock_guard lock(mutex_);
    if (watched_fd_ == fd) watched_fd_ = -1;
  }

  // Runs posted closures (and the watched descriptor's reads) until `done` holds; false when
  // `timeout` passes first.
  bool runUntil(const std::function<bool()>& done, Millis timeout = kDeadline) {
    const auto deadline = SteadyClock::now() + timeout;
    while (!done()) {
      std::function<void()> next;
      int fd = -1;
      {
        std::lock_guard lock(mutex_);
        if (!queue_.empty()) {
          next = std::move(queue_.front());
          queue_.pop_front();
        }
        fd = watched_fd_;
      }
      if (next) {
        next();
        continue;
      }
      const auto left = std::chrono::ceil<Millis>(deadline - SteadyClock::now()).count();
      if (left <= 0) return false;
      pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
      // Woken every 10 ms as well: `done` may hold by another thread's doing.
      if (::poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left, 10))) <= 0) continue;
      if (fds[0].revents != 0) {
        std::uint64_t count = 0;
        [[maybe_unused]] auto ignored = ::read(wake_fd_, &count, sizeof count);
      }
      if (fds[1].revents != 0) {
        std::function<void()> on_readable;
        {
          std::lock_guard lock(mutex_);
          if (watched_fd_ == fd) on_readable = on_readable_;
        }
        if (on_readable) on_readable();
      }
    }
    return true;
  }

  // Runs what has been posted so far, without waiting for more.
  void runPosted() {
    runUntil([&] {
      std::lock_guard lock(mutex_);
      return queue_.empty();
    });
  }

 private:
  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto ignored = ::write(wake_fd_, &one, sizeof one);
  }

  int wake_fd_;
  std::mutex mutex_;
  std::deque<std::function<void()>> queue_;
  int watched_fd_ = -1;
  std::function<void()> on_readable_;
};

// The driver end: accepts a WebSocket, answers the link's Hello with the driver's Hello, then
// queues every frame the link sends for the test and sends the frames the test gives it.
class TestDriver {
 public:
  TestDriver() {
    Poco::Net::ServerSocket socket(Poco::Net::SocketAddress("127.0.0.1", 0));
    port_ = socket.address().port();
    server_ = std::make_unique<Poco::Net::HTTPServer>(new Connections(this), socket,
                                                      new Poco::Net::HTTPServerParams);
    server_->start();
  }
  ~TestDriver() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    drop();
    server_->stopAll(true);
  }
  TestDriver(const TestDriver&) = delete;
  TestDriver& operator=(const TestDriver&) = delete;

  std::string url() const { return "ws://127.0.0.1:" + std::to_string(port_) + "/"; }

  // The Hello the link sent, once the handshake has happened.
  std::optional<proto::Hello> hello() const {
    std::lock_guard lock(mutex_);
    return hello_;
  }

  // The next frame the link sent after its Hello, or nullopt at the deadline.
  std::optional<proto::Envelope> nextFrame(Millis timeout = kDeadline) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return !frames_.empty(); })) return std::nullopt;
    proto::Envelope frame = std::move(frames_.front());
    frames_.pop_front();
    return frame;
  }

  // One text frame to the link; false when none is connected. (A failed send throws, and the
  // test fails with Poco's reason.)
  bool sendText(const std::string& text) {
    std::lock_guard lock(mutex_);
    if (!socket_) return false;
    socket_->sendFrame(text.data(), static_cast<int>(text.size()), WebSocket::FRAME_TEXT);
    return true;
  }
  bool send(const proto::Envelope& frame) { return sendText(proto::encodeEnvelope(frame)); }

  // Frames to send with the Hello reply, in the same write: they reach the link together
  // with the handshake's last frame.
  void sendWithHelloReply(std::vector<std::string> texts) {
    std::lock_guard lock(mutex_);
    with_hello_reply_ = std::move(texts);
  }

  // Ends the connection the way a crashed driver does: no close frame.
  void drop() {
    std::lock_guard lock(mutex_);
    if (socket_) ::shutdown(socket_->impl()->sockfd(), SHUT_RDWR);
  }

  // Waits until the link has ended the connection (a close frame, or the socket closed).
  bool waitForLinkGone(Millis timeout = kDeadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return link_gone_; });
  }

 private:
  // Poco's server calls: every request becomes a connection served by accept().
  struct Connection final : Poco::Net::HTTPRequestHandler {
    explicit Connection(TestDriver* owner) : driver(owner) {}
    void handleRequest(Poco::Net::HTTPServerRequest& request,
                       Poco::Net::HTTPServerResponse& response) override {
      driver->accept(request, response);
    }
    TestDriver* driver;
  };
  struct Connections final : Poco::Net::HTTPRequestHandlerFactory {
    explicit Connections(TestDriver* owner) : driver(owner) {}
    Poco::Net::HTTPRequestHandler* createRequestHandler(
        const Poco::Net::HTTPServerRequest&) override {
      return new Connection(driver);
    }
    TestDriver* driver;
  };

  // On a server thread: the WebSocket handshake, then serve() until the connection ends.
  void accept(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response) {
    try {
      WebSocket ws(request, response);
      try {
        serve(ws);
      } catch (const Poco::Exception&) {
        // a connection cut short: the test sees the effect through the link
      }
      // While `ws` still exists: socket_ points at it until this returns.
      connectionEnded();
      return;
    } catch (const Poco::Exception&) {
      // no WebSocket handshake
    }
    connectionEnded();
  }

  // The next text frame, decoded; nullopt once the link has closed or gone silent past the
  // deadline. Called on the server's thread only.
  static std::optional<proto::Envelope> receive(WebSocket& ws, Poco::Buffer<char>& buffer) {
    buffer.resize(0);
    int flags = 0;
    const int n = ws.receiveFrame(buffer, flags);
    if ((n == 0 && flags == 0) ||
        (flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_CLOSE) {
      return std::nullopt;
    }
    auto decoded = proto::decodeEnvelope(std::string_view(buffer.begin(), n));
    if (!decoded) {
      ADD_FAILURE() << "the link sent a malformed frame: " << decoded.error().message;
      return std::nullopt;
    }
    return std::move(decoded.value());
  }

  void serve(WebSocket& ws) {
    Poco::Buffer<char> buffer(0);
    ws.setReceiveTimeout(Poco::Timespan(5, 0));
    auto first = receive(ws, buffer);
    if (!first || first->type != "Hello") {
      ADD_FAILURE() << "the link did not start with Hello";
      return;
    }
    proto::Hello answer{proto::kProtocolVersion, "driver", "websocket-link-test driver"};
    std::string reply = proto::encodeEnvelope(proto::makeReply(first->id, proto::toJson(answer)));
    {
      std::lock_guard lock(mutex_);
      hello_ = proto::decodeBody<proto::Hello>(first->body);
      socket_ = std::shared_ptr<WebSocket>(&ws, [](WebSocket*) {});  // lives in handleRequest
      std::string bytes;
      net::appendServerFrame(bytes, WebSocket::FRAME_TEXT, reply);
      for (const auto& text : with_hello_reply_) {
        net::appendServerFrame(bytes, WebSocket::FRAME_TEXT, text);
      }
      net::sendAll(ws.impl()->sockfd(), bytes);
    }
    while (true) {
      {
        std::lock_guard lock(mutex_);
        if (stopping_) break;
      }
      if (!ws.poll(Poco::Timespan(0, 20L * 1000), Poco::Net::Socket::SELECT_READ)) continue;
      auto frame = receive(ws, buffer);
      if (!frame) break;
      {
        std::lock_guard lock(mutex_);
        frames_.push_back(std::move(*frame));
      }
      changed_.notify_all();
    }
  }

  void connectionEnded() {
    {
      std::lock_guard lock(mutex_);
      socket_.reset();
      link_gone_ = true;
    }
    changed_.notify_all();
  }

  std::unique_ptr<Poco::Net::HTTPServer> server_;
  int port_ = 0;
  mutable std::mutex mutex_;  // guards what follows, and sends on socket_
  std::condition_variable changed_;
  std::shared_ptr<WebSocket> socket_;  // while a link is connected
  std::optional<proto::Hello> hello_;
  std::deque<proto::Envelope> frames_;
  std::vector<std::string> with_hello_reply_;
  bool link_gone_ = false;
  bool stopping_ = false;
};

// What the link reported (DriverEvents), in order (on the test thread).
struct ListenerEvents final : DriverEvents {
  void onDriverConnected() override { ++connected; }
  void onDriverConnectFailed(const std::string& reason, bool retryable) override {
    connect_failed.emplace_back(reason, retryable);
  }
  void onDriverAuthFailed(const std::string& reason) override {
    connect_failed.emplace_back(reason, false);
  }
  void onDriverFrame(const proto::Envelope& frame) override { frames.push_back(frame); }
  void onDriverDisconnected(const std::string& reason) override { disconnected.push_back(reason); }

  int connected = 0;
  std::vector<std::pair<std::string, bool>> connect_failed;  // reason, retryable
  std::vector<proto::Envelope> frames;
  std::vector<std::string> disconnected;
};

// Each test runs twice: the link's I/O thread reads the socket, or the core thread does
// (read_on_core_thread, as the agent runs it over ws://).
class WebSocketLinkTest : public ::testing::TestWithParam<bool> {
 protected:
  // A link to `url` that reports into events_.
  std::unique_ptr<WebSocketLink> makeLink(
      const std::string& url, std::size_t max_frame_bytes = proto::kDefaultMaxFrameBytes) {
    WebSocketLink::Options options;
    options.url = url;
    options.max_frame_bytes = max_frame_bytes;
    options.software = "websocket-link-test 1.0";
    options.read_on_core_thread = GetParam();
    return std::make_unique<WebSocketLink>(options, sink_, events_);
  }

  // A link connected to driver_ (the test fails when it does not connect).
  std::unique_ptr<WebSocketLink> connectedLink() {
    auto link = makeLink(driver_.url());
    link->connect();
    EXPECT_TRUE(sink_.runUntil([&] { return events_.connected > 0; }))
        << "no connected event; connect_failed: "
        << (events_.connect_failed.empty() ? "none" : events_.connect_failed.front().first);
    return link;
  }

  // Asks `link` with GetPeers (the result lands in `result`); returns the ask as the driver
  // received it.
  std::optional<proto::Envelope> askPeers(WebSocketLink& link, Millis timeout,
                                          std::optional<AskResult>& result) {
    link.ask(proto::makeMessage(proto::GetPeers{.executor_id = "a1"}), timeout,
             [&result](AskResult r) { result = std::move(r); });
    return driver_.nextFrame();
  }

  // Declared in this order so that the link (made in each test) goes first, then the driver,
  // then the queue of whatever the link posted last.
  PostedEvents sink_;
  ListenerEvents events_;
  TestDriver driver_;
};

TEST_P(WebSocketLinkTest, HandshakeSendsHelloAndReportsConnected) {
  auto link = connectedLink();
  EXPECT_TRUE(link->connected());
  const auto hello = driver_.hello();
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(hello->protocol_version, proto::kProtocolVersion);
  EXPECT_EQ(hello->role, "agent");
  EXPECT_EQ(hello->software, "websocket-link-test 1.0");
  EXPECT_FALSE(hello->auth.has_value()) << "no secret configured, so no auth in Hello";
  EXPECT_EQ(events_.connected, 1);
}

TEST_P(WebSocketLinkTest, ConnectFailedIsReportedWhenNothingListens) {
  int port = 0;
  {
    Poco::Net::ServerSocket probe(Poco::Net::SocketAddress("127.0.0.1", 0));
    port = probe.address().port();
  }  // closed: nothing listens there now
  auto link = makeLink("ws://127.0.0.1:" + std::to_string(port) + "/");
  link->connect();
  ASSERT_TRUE(sink_.runUntil([&] { return !events_.connect_failed.empty(); }));
  EXPECT_TRUE(events_.connect_failed.front().second) << "a refused connection is worth a retry";
  EXPECT_EQ(events_.connected, 0);
  EXPECT_FALSE(link->connected());
}

TEST_P(WebSocketLinkTest, FrameFromTheDriverReachesTheListener) {
  auto link = connectedLink();
  proto::KillTask kill;
  kill.task_id = 7;
  kill.reason = "stage cancelled";
  ASSERT_TRUE(driver_.send(proto::makeMessage(kill)));

  ASSERT_TRUE(sink_.runUntil([&] { return !events_.frames.empty(); }));
  ASSERT_EQ(events_.frames.front().type, "KillTask");
  const auto received = proto::decodeBody<proto::KillTask>(events_.frames.front().body);
  EXPECT_EQ(received.task_id, 7u);
  EXPECT_EQ(received.reason, "stage cancelled");
}

TEST_P(WebSocketLinkTest, MessageSentReachesTheDriver) {
  auto link = connectedLink();
  proto::Heartbeat heartbeat;
  heartbeat.executor_id = "a1";
  heartbeat.running_tasks = 3;
  ASSERT_TRUE(link->send(proto::makeMessage(heartbeat)));

  const auto frame = driver_.nextFrame();
  ASSERT_TRUE(frame.has_value());
  EXPECT_EQ(frame->type, "Heartbeat");
  EXPECT_EQ(proto::decodeBody<proto::Heartbeat>(frame->body).running_tasks, 3);
}

TEST_P(WebSocketLinkTest, AskAnsweredByAReplyReachesItsCallback) {
  auto link = connectedLink();
  std::optional<AskResult> result;
  const auto ask = askPeers(*link, kDeadline, result);
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->type, "GetPeers");
  ASSERT_GT(ask->id, 0u) << "an ask carries an id for its Reply";
  ASSERT_TRUE(driver_.send(proto::makeReply(ask->id, {{"peers", proto::Json::array()}})));

  ASSERT_TRUE(sink_.runUntil([&] { return result.has_value(); }));
  EXPECT_TRUE(result->ok) << result->error.code << ": " << result->error.message;
  EXPECT_EQ(result->body, (proto::Json{{"peers", proto::Json::array()}}));
}

TEST_P(WebSocketLinkTest, RefusalOfAnAskReachesItsCallback) {
  auto link = connectedLink();
  std::optional<AskResult> result;
  const auto ask = askPeers(*link, kDeadline, result);
  ASSERT_TRUE(ask.has_value());
  ASSERT_TRUE(driver_.send(
      proto::makeErrorReply(ask->id, proto::error_code::kNotRegistered, "who are you?")));

  ASSERT_TRUE(sink_.runUntil([&] { return result.has_value(); }));
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(result->error.code, proto::error_code::kNotRegistered);
  EXPECT_EQ(result->error.message, "who are you?");
}

TEST_P(WebSocketLinkTest, AskWithoutAReplyTimesOutOnceAndALateReplyIsIgnored) {
  auto link = connectedLink();
  int calls = 0;
  std::optional<AskResult> result;
  link->ask(proto::makeMessage(proto::GetPeers{.executor_id = "a1"}), Millis(100),
            [&](AskResult r) {
              ++calls;
              result = std::move(r);
            });
  const auto ask = driver_.nextFrame();
  ASSERT_TRUE(ask.has_value());

  ASSERT_TRUE(sink_.runUntil([&] { return result.has_value(); }));
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(result->error.code, proto::error_code::kTimeout);

  // The reply comes after all: dropped. A frame after it shows the link read past it.
  ASSERT_TRUE(driver_.send(proto::makeReply(ask->id, proto::Json::object())));
  ASSERT_TRUE(driver_.send(proto::makeMessage(proto::KillTask{})));
  ASSERT_TRUE(sink_.runUntil([&] { return !events_.frames.empty(); }));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(link->connected());
}

TEST_P(WebSocketLinkTest, MalformedFrameIsAnsweredWithAnErrorAndTheLinkGoesOn) {
  auto link = connectedLink();
  ASSERT_TRUE(driver_.sendText("this is not JSON"));
  ASSERT_TRUE(sink_.runUntil([&] { return link->malformedFrames() == 1; }));

  const auto answer = driver_.nextFrame();
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(answer->isError()) << answer->type;
  ASSERT_TRUE(answer->error.has_value());
  EXPECT_EQ(answer->error->code, proto::error_code::kMalformedFrame);
  EXPECT_EQ(link->malformedFrames(), 1u);

  ASSERT_TRUE(driver_.send(proto::makeMessage(proto::KillTask{})));
  ASSERT_TRUE(sink_.runUntil([&] { return !events_.frames.empty(); }));
  EXPECT_EQ(events_.frames.front().type, "KillTask");
  EXPECT_TRUE(link->connected());
  EXPECT_TRUE(events_.disconnected.empty());
}

// The frame's header gives its length: the link reads the payload in pieces and drops it,
// answers frame_too_large and reads the next frame as usual (docs/protocol.md section 4).
TEST_P(WebSocketLinkTest, OversizedFrameIsDroppedAnsweredAndTheLinkGoesOn) {
  auto link = makeLink(driver_.url(), std::size_t{1} << 20);
  link->connect();
  ASSERT_TRUE(sink_.runUntil([&] { return events_.connected > 0; }));
  std::uint64_t malformed = 0;
  for (const std::size_t size : {(std::size_t{1} << 20) + 1, std::size_t{2} << 20}) {
    ASSERT_TRUE(driver_.sendText(std::string(size, ' ')));
    ++malformed;
    ASSERT_TRUE(sink_.runUntil([&] { return link->malformedFrames() == malformed; }));
    const auto answer = driver_.nextFrame();
    ASSERT_TRUE(answer.has_value());
    EXPECT_TRUE(answer->isError()) << answer->type;
    ASSERT_TRUE(answer->error.has_value());
    EXPECT_EQ(answer->error->code, proto::error_code::kFrameTooLarge);
    EXPECT_THAT(answer->error->message, HasSubstr(std::to_string(size) + " bytes"));
  }
  EXPECT_EQ(link->malformedFrames(), 2u);
  // A frame of exactly the limit is read; this one is not JSON, so it is malformed.
  ASSERT_TRUE(driver_.sendText(std::string(std::size_t{1} << 20, ' ')));
  ASSERT_TRUE(sink_.runUntil([&] { return link->malformedFrames() == 3; }));
  const auto at_limit = driver_.nextFrame();
  ASSERT_TRUE(at_limit.has_value());
  EXPECT_EQ(at_limit->error->code, proto::error_code::kMalformedFrame);

  ASSERT_TRUE(driver_.send(proto::makeMessage(proto::KillTask{})));
  ASSERT_TRUE(sink_.runUntil([&] { return !events_.frames.empty(); }));
  EXPECT_EQ(events_.frames.front().type, "KillTask");
  EXPECT_TRUE(link->connected());
  EXPECT_TRUE(events_.disconnected.empty());
}

// RFC 6455 section 8.1 fails the connection on text that is not UTF-8; the agent deliberately
// answers malformed_frame and keeps it, as for any other frame it cannot read
// (docs/protocol.md section 4).
TEST_P(WebSocketLinkTest, InvalidUtf8IsAnsweredMalformedAndTheLinkGoesOn) {
  auto link = connectedLink();
  ASSERT_TRUE(driver_.sendText("{\"type\": \"KillTask\", \"body\": {\"reason\": \"\xc3\x28\"}}"));
  ASSERT_TRUE(sink_.runUntil([&] { return link->malformedFrames() == 1; }));
  const auto answer = driver_.nextFrame();
  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(answer->error.has_value());
  EXPECT_EQ(answer->error->code, proto::error_code::kMalformedFrame);
  ASSERT_TRUE(driver_.send(proto::makeMessage(proto::KillTask{})));
  ASSERT_TRUE(sink_.runUntil([&] { return !events_.frames.empty(); }));
  EXPECT_EQ(events_.frames.size(), 1u);
  EXPECT_TRUE(link->connected());
}

// Frames the driver sent right behind its Hello reply are read from the socket with it, during
// the handshake: they wait in the link's buffer, not on the socket, when reading goes on.
TEST_P(WebSocketLinkTest, FramesThatCameWithTheHandshakeAreNotLeftUnread) {
  driver_.sendWithHelloReply({proto::encodeEnvelope(proto::makeMessage(proto::KillTask{})),
                              proto::encodeEnvelope(proto::makeMessage(proto::StopExecutor{}))});
  auto link = connectedLink();
  ASSERT_TRUE(sink_.runUntil([&] { return events_.frames.size() == 2; }));
  EXPECT_EQ(events_.frames[0].type, "KillTask");
  EXPECT_EQ(events_.frames[1].type, "StopExecutor");
}

// A frame longer than what the link reads ahead (64 KiB) arrives whole, between two short ones.
TEST_P(WebSocketLinkTest, AFrameLongerThanTheReadAheadArrivesWhole) {
  auto link = connectedLink();
  const std::string reason(std::size_t{300} * 1024, 'x');
  for (std::uint64_t id : {1, 2, 3}) {
    proto::KillTask kill;
    kill.task_id = id;
    if (id == 2) kill.reason = reason;
    ASSERT_TRUE(driver_.send(proto::makeMessage(kill)));
  }
  ASSERT_TRUE(sink_.runUntil([&] { return events_.frames.size() == 3; }));
  EXPECT_EQ(proto::decodeBody<proto::KillTask>(events_.frames[1].body).reason, reason);
  EXPECT_EQ(proto::decodeBody<proto::KillTask>(events_.frames[2].body).task_id, 3u);
  EXPECT_TRUE(link->connected());
}

TEST_P(WebSocketLinkTest, LostConnectionIsReportedOnceAndFailsPendingAsks) {
  auto link = connectedLink();
  std::optional<AskResult> result;
  ASSERT_TRUE(askPeers(*link, kDeadline, result).has_value());

  driver_.drop();
  ASSERT_TRUE(sink_.runUntil([&] { return !events_.disconnected.empty() && result.has_value(); }));
  EXPECT_FALSE(link->connected());
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(result->error.code, proto::error_code::kDisconnected);
  EXPECT_THAT(result->error.message, HasSubstr("disconnected from the driver"));
  // Sending now fails at once rather than blocking.
  EXPECT_FALSE(link->send(proto::makeMessage(proto::Heartbeat{})));
  sink_.runPosted();
  EXPECT_EQ(events_.disconnected.size(), 1u);
}

TEST_P(WebSocketLinkTest, CloseEndsTheIoThreadWithoutADisconnectEvent) {
  auto link = connectedLink();
  std::optional<AskResult> result;
  ASSERT_TRUE(askPeers(*link, kDeadline, result).has_value());

  // close() joins the I/O thread: its return is the proof that the thread ended.
  auto closed = std::async(std::launch::async, [&] { link->close(); });
  ASSERT_EQ(closed.wait_for(kDeadline), std::future_status::ready) << "close() did not return";
  EXPECT_TRUE(driver_.waitForLinkGone()) << "the driver still holds the connection";
  EXPECT_FALSE(link->connected());
  EXPECT_FALSE(link->send(proto::makeMessage(proto::Heartbeat{})));

  // The thread has ended, so whatever it posted is in the queue already.
  sink_.runPosted();
  EXPECT_TRUE(events_.disconnected.empty()) << events_.disconnected.front();
  ASSERT_TRUE(result.has_value()) << "an ask pending at close() was never answered";
  EXPECT_EQ(result->error.code, proto::error_code::kDisconnected);
}

INSTANTIATE_TEST_SUITE_P(Readers, WebSocketLinkTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "CoreThread" : "IoThread";
                         });

}  // namespace
}  // namespace dockhand::agent
