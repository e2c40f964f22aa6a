#include "support/fake_driver.h"

#include <sys/socket.h>

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

#include "dockhand/protocol/auth.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::testing {

namespace proto = dockhand::protocol;
using Poco::Net::WebSocket;

namespace {

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(FakeDriver& driver) : driver_(driver) {}
  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    try {
      WebSocket ws(request, response);
      driver_.serve(ws);
    } catch (const Poco::Exception&) {
      // the test sees the effect through the agent
    }
  }

 private:
  FakeDriver& driver_;
};

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(FakeDriver& driver) : driver_(driver) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new Handler(driver_);
  }

 private:
  FakeDriver& driver_;
};

}  // namespace

FakeDriver::FakeDriver() : FakeDriver(Options{}) {}

FakeDriver::FakeDriver(Options options) : options_(std::move(options)) {
  Poco::Net::ServerSocket socket(Poco::Net::SocketAddress("127.0.0.1", 0));
  port_ = socket.address().port();
  auto* params = new Poco::Net::HTTPServerParams;
  params->setMaxThreads(8);
  server_ = std::make_unique<Poco::Net::HTTPServer>(new Factory(*this), socket, params);
  server_->start();
}

FakeDriver::~FakeDriver() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  dropConnection();
  server_->stopAll(true);
}

void FakeDriver::serve(WebSocket& ws) {
  auto self = std::shared_ptr<WebSocket>(&ws, [](WebSocket*) {});
  {
    std::lock_guard lock(mutex_);
    socket_ = self;
  }
  Poco::Buffer<char> buffer(0);
  try {
    while (true) {
      {
        std::lock_guard lock(mutex_);
        if (stopping_ || socket_ != self) break;
      }
      if (!ws.poll(Poco::Timespan(0, 50L * 1000), Poco::Net::Socket::SELECT_READ)) continue;
      int flags = 0;
      buffer.resize(0);
      int n = ws.receiveFrame(buffer, flags);
      if (n == 0 && flags == 0) break;
      if ((flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_CLOSE) break;
      auto decoded = proto::decodeEnvelope(std::string_view(buffer.begin(), n));
      if (!decoded) continue;
      proto::Envelope env = decoded.value();
      if (env.type == "Hello") {
        proto::Hello reply{1, "driver", "fake"};
        auto hello = proto::decodeBody<proto::Hello>(env.body);
        if (options_.secret && !hello.auth) {
          send(proto::makeErrorReply(env.id, proto::error_code::kAuthFailed,
                                     "fake driver: authentication required"));
        } else {
          if (options_.secret) {
            proto::auth::ClusterSecret secret(*options_.secret);
            std::lock_guard lock(mutex_);
            agent_nonce_ = hello.auth->nonce;
            driver_nonce_ = proto::auth::randomNonce();
            reply.auth = proto::HelloAuth{
                "hmac-sha256", driver_nonce_,
                proto::auth::helloProof(secret, "driver", agent_nonce_, driver_nonce_)};
          }
          send(proto::makeReply(env.id, proto::toJson(reply)));
        }
      } else if (env.type == "Authenticate") {
        auto authenticate = proto::decodeBody<proto::Authenticate>(env.body);
        bool ok = false;
        if (options_.secret) {
          proto::auth::ClusterSecret secret(*options_.secret);
          std::lock_guard lock(mutex_);
          ok = proto::auth::checkHelloProof(secret, "agent", agent_nonce_, driver_nonce_,
                                            authenticate.proof);
        }
        send(ok ? proto::makeReply(env.id, proto::Json::object())
                : proto::makeErrorReply(env.id, proto::error_code::kAuthFailed,
                                        "fake driver: wrong proof"));
      } else if (env.type == "RetrieveAppConfig") {
        proto::AppConfig config;
        config.properties = options_.properties;
        config.resource_profile = options_.resource_profile;
        send(proto::makeReply(env.id, proto::toJson(config)));
      } else if (env.type == "GetPeers") {
        std::vector<proto::Peer> peers;
        {
          std::lock_guard lock(mutex_);
          peers = peers_;
        }
        send(proto::makeReply(env.id, proto::toJson(peers)));
      } else if (env.type == "ExecutorDecommissioning") {
        send(proto::makeReply(env.id, proto::Json{{"accepted", options_.accept_decommission}}));
      } else if (env.type == "RegisterExecutor") {
        {
          std::lock_guard lock(mutex_);
          block_url_ = env.body.value("block_url", std::string());
        }
        if (options_.refuse_registration) {
          send(proto::makeErrorReply(env.id, proto::error_code::kRegistrationRefused,
                                     "refused by the test"));
        } else {
          send(proto::makeReply(env.id, proto::Json::object()));
        }
      } else if (env.type == "ResumeExecutor" && options_.accept_resume) {
        {
          std::lock_guard lock(mutex_);
          registered_ = true;
          for (const auto& block : env.body.value("blocks", proto::Json::array())) {
            const std::string url = block.value("url", std::string());
            const auto at = url.find("/blocks/");
            if (at != std::string::npos) block_url_ = url.substr(0, at);
          }
        }
        // It counts there what the agent says runs there (as a driver that launched them).
        proto::ResumeAccepted accepted;
        for (const auto& id : env.body.value("running", proto::Json::array())) {
          accepted.tasks.push_back(id.get<std::uint64_t>());
        }
        send(proto::makeReply(env.id, proto::toJson(accepted)));
      } else if (env.type == "ResumeExecutor") {
        // A fake holds no agent across connections, as a restarted driver would not.
        send(proto::makeErrorReply(env.id, proto::error_code::kNotResumable,
                                   "the fake driver holds no executor"));
      } else if (env.type == "LaunchedExecutor") {
        std::lock_guard lock(mutex_);
        registered_ = true;
      }
      record(std::move(env));
    }
  } catch (const std::exception&) {
    // connection gone, or a body the fake cannot read: the test sees the effect
  }
  std::lock_guard lock(mutex_);
  if (socket_ == self) socket_.reset();
  changed_.notify_all();
}

std::vector<proto::Envelope> FakeDriver::history() const {
  std::lock_guard lock(mutex_);
  return history_;
}

void FakeDriver::setPeers(std::vector<proto::Peer> peers) {
  std::lock_guard lock(mutex_);
  peers_ = std::move(peers);
}

std::string FakeDriver::agentBlockUrl() const {
  std::lock_guard lock(mutex_);
  return block_url_;
}

void FakeDriver::record(proto::Envelope frame) {
  std::lock_guard lock(mutex_);
  history_.push_back(frame);
  received_.push_back(std::move(frame));
  changed_.notify_all();
}

bool FakeDriver::waitForRegistration(Millis timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return registered_; });
}

std::optional<proto::Envelope> FakeDriver::waitFor(
    const std::function<bool(const proto::Envelope&)>& match, Millis timeout) {
  std::unique_lock lock(mutex_);
  std::optional<proto::Envelope> found;
  changed_.wait_for(lock, timeout, [&] {
    for (auto it = received_.begin(); it != received_.end(); ++it) {
      if (match(*it)) {
        found = *it;
        received_.erase(it);
        return true;
      }
    }
    return false;
  });
  return found;
}

std::optional<proto::Envelope> FakeDriver::waitForType(const std::string& type, Millis timeout) {
  return waitFor([&](const proto::Envelope& e) { return e.type == type; }, timeout);
}

std::optional<proto::StatusUpdate> FakeDriver::waitForStatus(std::uint64_t task_id,
                                                             proto::TaskState state,
                                                             Millis timeout) {
  auto frame = waitFor(
      [&](const proto::Envelope& e) {
        if (e.type != "StatusUpdate") return false;
        auto u = proto::decodeBody<proto::StatusUpdate>(e.body);
        return u.task_id == task_id && u.state == state;
      },
      timeout);
  if (!frame) return std::nullopt;
  return proto::decodeBody<proto::StatusUpdate>(frame->body);
}

bool FakeDriver::sendRaw(const std::string& text) {
  std::lock_guard lock(mutex_);
  if (!socket_) return false;
  try {
    socket_->sendFrame(text.data(), static_cast<int>(text.size()), WebSocket::FRAME_TEXT);
    return true;
  } catch (const Poco::Exception&) {
    return false;
  }
}

bool FakeDriver::send(const proto::Envelope& frame) {
  return sendRaw(proto::encodeEnvelope(frame));
}

void FakeDriver::dropConnection() {
  std::lock_guard lock(mutex_);
  if (socket_) {
    // Both directions at once, no close frame: the agent sees the connection end.
    ::shutdown(socket_->impl()->sockfd(), SHUT_RDWR);
    socket_.reset();
  }
  changed_.notify_all();
}

bool FakeDriver::connected() const {
  std::lock_guard lock(mutex_);
  return socket_ != nullptr;
}

}  // namespace dockhand::testing
