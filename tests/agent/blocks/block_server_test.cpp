#include "blocks/block_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <gtest/gtest.h>

#include "blocks/block_fetcher.h"
#include "blocks/checksum.h"
#include "support/tmpfs_mount.h"

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;
using Poco::Net::HTTPRequest;
using Poco::Net::HTTPResponse;

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
};

std::string xxh64Of(const std::string& data) {
  Xxh64 h;
  h.update(data.data(), data.size());
  return h.text();
}

class BlockServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dockhand-server-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
    store = std::make_unique<BlockStore>(root / "blocks");
    fs::create_directories(root / "fallback");
    BlockServerOptions options;
    options.fallback_dir = root / "fallback";
    if (with_auth) {
      options.verifier = std::make_shared<protocol::auth::RequestVerifier>(secret, 60000);
    }
    server = std::make_unique<BlockServer>(
        options, *store,
        [] {
          return nlohmann::json{{"state", "running"}};
        },
        [] { return std::string("# TYPE x counter\nx 1\n"); });
    server->start();
  }
  void TearDown() override {
    server.reset();
    store.reset();
    fs::remove_all(root);
  }

  Reply request(const std::string& method, const std::string& path, const std::string& body = {},
                const std::map<std::string, std::string>& headers = {}) {
    Poco::Net::HTTPClientSession session("127.0.0.1", static_cast<Poco::UInt16>(server->port()));
    HTTPRequest req(method, path, HTTPRequest::HTTP_1_1);
    for (const auto& [k, v] : headers) req.set(k, v);
    if (method == HTTPRequest::HTTP_PUT)
      req.setContentLength(static_cast<std::streamsize>(body.size()));
    session.sendRequest(req) << body;
    HTTPResponse res;
    std::istream& in = session.receiveResponse(res);
    Reply reply;
    reply.status = static_cast<int>(res.getStatus());
    Poco::StreamCopier::copyToString(in, reply.body);
    for (const auto& [k, v] : res) reply.headers[k] = v;
    return reply;
  }
  static std::string checksumOf(const std::string& data) { return xxh64Of(data); }
  Reply put(const std::string& id, const std::string& data) {
    return request(HTTPRequest::HTTP_PUT, "/blocks/" + id, data,
                   {{"X-Dockhand-Checksum", checksumOf(data)}});
  }

  fs::path root;
  std::unique_ptr<BlockStore> store;
  std::unique_ptr<BlockServer> server;
  bool with_auth = false;
  const protocol::auth::ClusterSecret secret{"the-cluster-secret-for-blocks"};
};

// The same server in a cluster that authenticates.
class AuthBlockServerTest : public BlockServerTest {
 protected:
  AuthBlockServerTest() { with_auth = true; }
  std::string sign(const std::string& method, const std::string& path,
                   const std::string& content = "",
                   const protocol::auth::ClusterSecret* with = nullptr) {
    return protocol::auth::signRequest(with ? *with : secret, {method, path, content},
                                       protocol::auth::wallClockMs(),
                                       protocol::auth::randomNonce());
  }
  Reply signedPut(const std::string& id, const std::string& data,
                  const protocol::auth::ClusterSecret* with = nullptr) {
    const std::string sum = checksumOf(data);
    return request(
        HTTPRequest::HTTP_PUT, "/blocks/" + id, data,
        {{"X-Dockhand-Checksum", sum}, {"Authorization", sign("PUT", "/blocks/" + id, sum, with)}});
  }
};

TEST_F(BlockServerTest, PutThenGetHeadAndRange) {
  std::string data = "0123456789abcdefghij";
  Reply stored = put("shuffle_0_1_2", data);
  EXPECT_EQ(stored.status, 201) << stored.body;
  EXPECT_EQ(nlohmann::json::parse(stored.body)["checksum"], checksumOf(data));

  Reply got = request(HTTPRequest::HTTP_GET, "/blocks/shuffle_0_1_2");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, data);
  EXPECT_EQ(got.headers["X-Dockhand-Checksum"], checksumOf(data));

  Reply head = request(HTTPRequest::HTTP_HEAD, "/blocks/shuffle_0_1_2");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["Content-Length"], "20");
  EXPECT_TRUE(head.body.empty());

  Reply range =
      request(HTTPRequest::HTTP_GET, "/blocks/shuffle_0_1_2", {}, {{"Range", "bytes=2-5"}});
  EXPECT_EQ(range.status, 206);
  EXPECT_EQ(range.body, "2345");
  EXPECT_EQ(range.headers["Content-Range"], "bytes 2-5/20");
  Reply suffix =
      request(HTTPRequest::HTTP_GET, "/blocks/shuffle_0_1_2", {}, {{"Range", "bytes=-3"}});
  EXPECT_EQ(suffix.body, "hij");
  Reply open =
      request(HTTPRequest::HTTP_GET, "/blocks/shuffle_0_1_2", {}, {{"Range", "bytes=18-"}});
  EXPECT_EQ(open.body, "ij");
  Reply beyond =
      request(HTTPRequest::HTTP_GET, "/blocks/shuffle_0_1_2", {}, {{"Range", "bytes=40-"}});
  EXPECT_EQ(beyond.status, 416);
}

TEST_F(BlockServerTest, PutRefusals) {
  EXPECT_EQ(request(HTTPRequest::HTTP_PUT, "/blocks/rdd_1_1", "abc").status, 400)
      << "no checksum header";
  Reply wrong = request(HTTPRequest::HTTP_PUT, "/blocks/rdd_1_1", "abc",
                        {{"X-Dockhand-Checksum", "xxh64:0000000000000000"}});
  EXPECT_EQ(wrong.status, 400);
  EXPECT_NE(wrong.body.find("checksum mismatch"), std::string::npos) << wrong.body;
  EXPECT_FALSE(store->find("rdd_1_1"));
  EXPECT_EQ(put("..%2Fx", "abc").status, 400);
  EXPECT_EQ(put("not_a_block", "abc").status, 400);

  server->setAcceptingWrites(false);
  Reply refused = put("rdd_1_1", "abc");
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(refused.body.find("decommissioning"), std::string::npos) << refused.body;
  EXPECT_FALSE(store->find("rdd_1_1"));
}

// A raw client: what it sends goes out in one write, so header and body (and a second request)
// arrive together, as a pipelining client or a fast sender makes them.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send(const std::string& data) {
    std::size_t at = 0;
    while (at < data.size()) {
      ssize_t n = ::send(fd_, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<std::size_t>(n);
    }
    return true;
  }
  void closeWrite() { ::shutdown(fd_, SHUT_WR); }
  // Reads until `count` HTTP status lines have arrived, the peer closes, or 10 s pass.
  std::vector<int> statuses(std::size_t count) {
    std::string text;
    std::vector<int> out;
    char buffer[4096];
    while (out.size() < count) {
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
      out.clear();
      for (std::size_t at = text.find("HTTP/1.1 "); at != std::string::npos;
           at = text.find("HTTP/1.1 ", at + 1)) {
        out.push_back(std::atoi(text.c_str() + at + 9));
      }
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string putRequest(const std::string& id, const std::string& body, const std::string& checksum,
                       std::size_t length) {
  return "PUT /blocks/" + id +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(length) +
         "\r\nX-Dockhand-Checksum: " + checksum + "\r\n\r\n" + body;
}

TEST_F(BlockServerTest, PipelinedPutsOnOneConnectionEachGetExactlyTheirBody) {
  std::string big(3 * 1024 * 1024 + 12345, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) % 251);
  std::string small = "the second block";
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send(putRequest("shuffle_1_0_0", big, checksumOf(big), big.size()) +
                          putRequest("shuffle_1_1_0", small, checksumOf(small), small.size())));
  EXPECT_EQ(client.statuses(2), (std::vector<int>{201, 201}));
  Reply first = request(HTTPRequest::HTTP_GET, "/blocks/shuffle_1_0_0");
  EXPECT_EQ(first.status, 200);
  EXPECT_TRUE(first.body == big) << "first block differs (" << first.body.size() << " bytes)";
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/blocks/shuffle_1_1_0").body, small);
}

TEST_F(BlockServerTest, PutWhoseSenderStopsMidBodyStoresNothing) {
  std::string body(100000, 'x');
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(
      client.send(putRequest("rdd_4_4", body.substr(0, 40000), checksumOf(body), body.size())));
  client.closeWrite();
  EXPECT_EQ(client.statuses(1), std::vector<int>{400});
  EXPECT_FALSE(store->find("rdd_4_4"));
  EXPECT_TRUE(fs::is_empty(root / "blocks" / ".incoming")) << "no temporary file is left";
}

TEST_F(BlockServerTest, RefusedPutBodyIsNeverTakenAsTheNextRequest) {
  server->setAcceptingWrites(false);
  std::string smuggled = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send(putRequest("rdd_5_5", smuggled, xxh64Of(smuggled), smuggled.size())));
  EXPECT_EQ(client.statuses(2), std::vector<int>{503}) << "one answer, then the connection closes";
}

// The block directory on a 1 MiB tmpfs: a disk that really fills up.
class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dockhand-full-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
    disk = std::make_unique<testing::TmpfsMount>(root / "disk", 1 << 20);
    if (!disk->mounted()) GTEST_SKIP() << disk->error();
    store = std::make_unique<BlockStore>(root / "disk" / "blocks");
    server = std::make_unique<BlockServer>(BlockServerOptions{}, *store, nullptr);
    server->start();
  }
  void TearDown() override {
    server.reset();
    store.reset();
    disk.reset();
    fs::remove_all(root);
  }
  bool incomingIsEmpty() const { return fs::is_empty(root / "disk" / "blocks" / ".incoming"); }

  fs::path root;
  std::unique_ptr<testing::TmpfsMount> disk;
  std::unique_ptr<BlockStore> store;
  std::unique_ptr<BlockServer> server;
};

TEST_F(FullDiskTest, BlockLargerThanTheFreeSpaceIsRefusedBeforeItsBody) {
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  // Only the header: the answer must not wait for a body it will not take.
  ASSERT_TRUE(client.send(putRequest("shuffle_2_0_0", "", "xxh64:0123456789abcdef", 4 << 20)));
  EXPECT_EQ(client.statuses(1), std::vector<int>{507});
  EXPECT_FALSE(store->find("shuffle_2_0_0"));
  EXPECT_TRUE(incomingIsEmpty());
}

TEST_F(FullDiskTest, DiskFillingUpMidBodyIs507AndLeavesNoTemporaryFile) {
  // Chunked: no length to check up front, so the disk fills while the body is written.
  std::string data(2 << 20, 'z');
  std::string chunked =
      "PUT /blocks/shuffle_2_0_0 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Transfer-Encoding: chunked\r\nX-Dockhand-Checksum: " +
      xxh64Of(data) + "\r\n\r\n";
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
  chunked += size_line + data + "\r\n0\r\n\r\n";
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  // The server may stop reading once the disk is full: send from another thread.
  std::thread sender([&] { client.send(chunked); });
  std::vector<int> got = client.statuses(1);
  client.closeWrite();
  sender.join();
  EXPECT_EQ(got, std::vector<int>{507});
  EXPECT_FALSE(store->find("shuffle_2_0_0"));
  EXPECT_TRUE(incomingIsEmpty()) << "the partial block must be removed";

  // The space is free again: a block that fits is taken.
  std::string small(100000, 's');
  RawClient again(server->port());
  ASSERT_TRUE(again.connected());
  ASSERT_TRUE(again.send(putRequest("shuffle_2_1_0", small, xxh64Of(small), small.size())));
  EXPECT_EQ(again.statuses(1), std::vector<int>{201});
}

TEST_F(BlockServerTest, MissingBlockComesFromTheFallbackDirectory) {
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/blocks/rdd_3_3").status, 404);
  std::ofstream(root / "fallback" / "rdd_3_3") << "from fallback";
  Reply got = request(HTTPRequest::HTTP_GET, "/blocks/rdd_3_3");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "from fallback");
}

TEST_F(BlockServerTest, DeleteRemovesTheBlockFromTheStoreButNotFromTheFallback) {
  ASSERT_EQ(put("task_7_result", "the result").status, 201);
  Reply removed = request(HTTPRequest::HTTP_DELETE, "/blocks/task_7_result");
  EXPECT_EQ(removed.status, 204) << removed.body;
  EXPECT_TRUE(removed.body.empty());
  EXPECT_FALSE(store->find("task_7_result").has_value());
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/blocks/task_7_result").status, 404);
  // A second DELETE finds nothing.
  Reply again = request(HTTPRequest::HTTP_DELETE, "/blocks/task_7_result");
  EXPECT_EQ(again.status, 404);
  EXPECT_NE(again.body.find("not here"), std::string::npos) << again.body;
  // The shared fallback store is served, never emptied through one agent.
  std::ofstream(root / "fallback" / "rdd_4_4") << "kept";
  EXPECT_EQ(request(HTTPRequest::HTTP_DELETE, "/blocks/rdd_4_4").status, 404);
  EXPECT_TRUE(fs::exists(root / "fallback" / "rdd_4_4"));
  EXPECT_EQ(request(HTTPRequest::HTTP_DELETE, "/blocks/not-a-block").status, 400);
  Reply post = request(HTTPRequest::HTTP_POST, "/blocks/rdd_4_4");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["Allow"], "GET, HEAD, PUT, DELETE");
  // The id can be written again.
  EXPECT_EQ(put("task_7_result", "the result").status, 201);
}

TEST_F(BlockServerTest, HealthAndStatus) {
  Reply health = request(HTTPRequest::HTTP_GET, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  Reply status = request(HTTPRequest::HTTP_GET, "/v1/status");
  EXPECT_EQ(status.status, 200);
  EXPECT_EQ(nlohmann::json::parse(status.body)["state"], "running");
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/nothing").status, 404);
  EXPECT_EQ(request(HTTPRequest::HTTP_PATCH, "/blocks/rdd_1_1").status, 405);
}

TEST_F(BlockServerTest, MetricsAreTheProvidersText) {
  Reply metrics = request(HTTPRequest::HTTP_GET, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body, "# TYPE x counter\nx 1\n");
  EXPECT_EQ(metrics.headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(request(HTTPRequest::HTTP_POST, "/metrics").status, 405);
}

TEST_F(BlockServerTest, FetchBlockVerifiesAndNamesBlockAndUrl) {
  std::string data(3 << 20, 'k');
  ASSERT_EQ(put("rdd_5_0", data).status, 201);
  std::string url = "http://127.0.0.1:" + std::to_string(server->port()) + "/blocks/rdd_5_0";
  std::atomic<bool> cancelled{false};
  protocol::InputBlock good{"rdd_5_0", url, data.size(), checksumOf(data)};
  fetchBlock(good, root / "in", cancelled, std::chrono::milliseconds(5000));
  std::ifstream in(root / "in", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), data);

  protocol::InputBlock bad{"rdd_5_0", url, data.size(), "xxh64:0000000000000000"};
  try {
    fetchBlock(bad, root / "bad", cancelled, std::chrono::milliseconds(5000));
    FAIL() << "a corrupt block was accepted";
  } catch (const FetchError& e) {
    EXPECT_NE(std::string(e.what()).find("rdd_5_0"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(url), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(root / "bad"));
  EXPECT_FALSE(fs::exists(root / "bad.part"));

  protocol::InputBlock missing{"rdd_6_0", url.substr(0, url.size() - 7) + "rdd_6_0", 0, ""};
  EXPECT_THROW(fetchBlock(missing, root / "m", cancelled, std::chrono::milliseconds(5000)),
               FetchError);
}

TEST_F(AuthBlockServerTest, RefusesUnsignedAndWronglySignedPutAndGet) {
  const protocol::auth::ClusterSecret other("another-secret-not-the-cluster");
  Reply unsigned_put = put("rdd_1_0", "data");
  EXPECT_EQ(unsigned_put.status, 401) << unsigned_put.body;
  EXPECT_NE(unsigned_put.body.find("requires signed requests"), std::string::npos)
      << unsigned_put.body;
  EXPECT_EQ(unsigned_put.headers["WWW-Authenticate"], "Dockhand-HMAC-SHA256");
  Reply wrong_put = signedPut("rdd_1_0", "data", &other);
  EXPECT_EQ(wrong_put.status, 401);
  EXPECT_NE(wrong_put.body.find("does not match"), std::string::npos) << wrong_put.body;
  EXPECT_FALSE(store->find("rdd_1_0").has_value()) << "a refused PUT stored the block";

  ASSERT_EQ(signedPut("rdd_1_0", "data").status, 201);
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/blocks/rdd_1_0").status, 401);
  EXPECT_EQ(request(HTTPRequest::HTTP_HEAD, "/blocks/rdd_1_0").status, 401);
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/blocks/rdd_1_0", "",
                    {{"Authorization", sign("GET", "/blocks/rdd_1_0", "", &other)}})
                .status,
            401);
  // Signed for another block, or another method.
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/blocks/rdd_1_0", "",
                    {{"Authorization", sign("GET", "/blocks/rdd_1_1")}})
                .status,
            401);
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/blocks/rdd_1_0", "",
                    {{"Authorization", sign("PUT", "/blocks/rdd_1_0")}})
                .status,
            401);
  Reply good = request(HTTPRequest::HTTP_GET, "/blocks/rdd_1_0", "",
                       {{"Authorization", sign("GET", "/blocks/rdd_1_0")}});
  EXPECT_EQ(good.status, 200);
  EXPECT_EQ(good.body, "data");
  EXPECT_EQ(server->authRefusals(), 7u);
  // Health and status carry no block data and stay open.
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/healthz").status, 200);
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/v1/status").status, 200);
  // As do the metrics.
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/metrics").status, 200);
}

TEST_F(AuthBlockServerTest, DeleteNeedsASignatureForDelete) {
  ASSERT_EQ(signedPut("task_9_result", "bytes").status, 201);
  EXPECT_EQ(request(HTTPRequest::HTTP_DELETE, "/blocks/task_9_result").status, 401);
  // A GET's signature does not remove anything.
  EXPECT_EQ(request(HTTPRequest::HTTP_DELETE, "/blocks/task_9_result", "",
                    {{"Authorization", sign("GET", "/blocks/task_9_result")}})
                .status,
            401);
  EXPECT_TRUE(store->find("task_9_result").has_value());
  EXPECT_EQ(request(HTTPRequest::HTTP_DELETE, "/blocks/task_9_result", "",
                    {{"Authorization", sign("DELETE", "/blocks/task_9_result")}})
                .status,
            204);
  EXPECT_FALSE(store->find("task_9_result").has_value());
}

TEST_F(AuthBlockServerTest, RefusesAReplayedRequest) {
  ASSERT_EQ(signedPut("rdd_2_0", "payload").status, 201);
  const std::string header = sign("GET", "/blocks/rdd_2_0");
  EXPECT_EQ(
      request(HTTPRequest::HTTP_GET, "/blocks/rdd_2_0", "", {{"Authorization", header}}).status,
      200);
  Reply replay = request(HTTPRequest::HTTP_GET, "/blocks/rdd_2_0", "", {{"Authorization", header}});
  EXPECT_EQ(replay.status, 401);
  EXPECT_NE(replay.body.find("replayed"), std::string::npos) << replay.body;
  // A PUT whose body is swapped (checksum changed) does not match its signature.
  const std::string sum = checksumOf("other");
  Reply swapped = request(HTTPRequest::HTTP_PUT, "/blocks/rdd_2_1", "other",
                          {{"X-Dockhand-Checksum", sum},
                           {"Authorization", sign("PUT", "/blocks/rdd_2_1", checksumOf("data"))}});
  EXPECT_EQ(swapped.status, 401) << swapped.body;
}

TEST_F(AuthBlockServerTest, FetchBlockSignsWhenGivenASigner) {
  ASSERT_EQ(signedPut("rdd_3_0", "fetched").status, 201);
  const std::string url = "http://127.0.0.1:" + std::to_string(server->port()) + "/blocks/rdd_3_0";
  std::atomic<bool> cancelled{false};
  protocol::InputBlock input{"rdd_3_0", url, 7, checksumOf("fetched")};
  try {
    fetchBlock(input, root / "unsigned", cancelled, std::chrono::milliseconds(5000));
    FAIL() << "an unsigned fetch was served";
  } catch (const FetchError& e) {
    EXPECT_NE(std::string(e.what()).find("401"), std::string::npos) << e.what();
  }
  fetchBlock(input, root / "signed", cancelled, std::chrono::milliseconds(5000),
             protocol::auth::makeRequestSigner(secret));
  std::ifstream in(root / "signed", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "fetched");
}

}  // namespace
}  // namespace dockhand::agent
