#include "blocks/block_server.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <gtest/gtest.h>

#include "blocks/block_fetcher.h"
#include "blocks/checksum.h"

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
    server = std::make_unique<BlockServer>(options, *store, [] {
      return nlohmann::json{{"state", "running"}};
    });
    server->start();
  }
  void TearDown() override {
    server.reset();
    store.reset();
    fs::remove_all(root);
  }

  Reply request(const std::string& method, const std::string& path, const std::string& body = {},
                std::map<std::string, std::string> headers = {}) {
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
  static std::string checksumOf(const std::string& data) {
    Xxh64 h;
    h.update(data.data(), data.size());
    return h.text();
  }
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

TEST_F(BlockServerTest, MissingBlockComesFromTheFallbackDirectory) {
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/blocks/rdd_3_3").status, 404);
  std::ofstream(root / "fallback" / "rdd_3_3") << "from fallback";
  Reply got = request(HTTPRequest::HTTP_GET, "/blocks/rdd_3_3");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "from fallback");
}

TEST_F(BlockServerTest, HealthAndStatus) {
  Reply health = request(HTTPRequest::HTTP_GET, "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  Reply status = request(HTTPRequest::HTTP_GET, "/v1/status");
  EXPECT_EQ(status.status, 200);
  EXPECT_EQ(nlohmann::json::parse(status.body)["state"], "running");
  EXPECT_EQ(request(HTTPRequest::HTTP_GET, "/nothing").status, 404);
  EXPECT_EQ(request(HTTPRequest::HTTP_DELETE, "/blocks/rdd_1_1").status, 405);
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
