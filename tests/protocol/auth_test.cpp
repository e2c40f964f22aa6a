#include "dockhand/protocol/auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace dockhand::protocol::auth {
namespace {

const ClusterSecret kSecret("correct horse battery staple");
const ClusterSecret kOtherSecret("correct horse battery stapler");

class SecretFile {
 public:
  SecretFile(const std::string& content, mode_t mode) {
    char dir_template[] = "/tmp/dockhand-auth-test-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    path_ = dir_ + "/secret";
    std::ofstream(path_) << content;
    ::chmod(path_.c_str(), mode);
  }
  ~SecretFile() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

std::string refusalOf(const std::string& path) {
  try {
    loadSecretFile(path);
  } catch (const SecretError& e) {
    return e.what();
  }
  return "";
}

TEST(HmacTest, MatchesRfc4231) {
  EXPECT_EQ(toHex(hmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(toHex(hmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than SHA-256's block is hashed first.
  EXPECT_EQ(toHex(hmacSha256(std::string(131, '\xaa'),
                             "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacTest, ConstantTimeCompareTellsEqualFromUnequal) {
  EXPECT_TRUE(equalConstantTime("abc", "abc"));
  EXPECT_TRUE(equalConstantTime("", ""));
  EXPECT_FALSE(equalConstantTime("abc", "abd"));
  EXPECT_FALSE(equalConstantTime("abc", "abcd"));
}

TEST(NonceTest, IsFreshHexOfSixteenBytes) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string nonce = randomNonce();
    EXPECT_EQ(nonce.size(), 32u);
    EXPECT_TRUE(validNonce(nonce)) << nonce;
    EXPECT_TRUE(seen.insert(nonce).second) << "nonce repeated: " << nonce;
  }
  EXPECT_FALSE(validNonce("abc"));
  EXPECT_FALSE(validNonce(std::string(32, 'g')));
  EXPECT_FALSE(validNonce(std::string(129, 'a')));
}

TEST(HelloProofTest, BothSidesAgreeWithTheSameSecret) {
  const std::string a = randomNonce();
  const std::string d = randomNonce();
  std::string driver_proof = helloProof(kSecret, "driver", a, d);
  EXPECT_EQ(driver_proof.size(), 64u);
  EXPECT_TRUE(checkHelloProof(kSecret, "driver", a, d, driver_proof));
  EXPECT_TRUE(checkHelloProof(kSecret, "agent", a, d, helloProof(kSecret, "agent", a, d)));
}

TEST(HelloProofTest, WrongSecretFails) {
  const std::string a = randomNonce();
  const std::string d = randomNonce();
  EXPECT_FALSE(checkHelloProof(kSecret, "driver", a, d, helloProof(kOtherSecret, "driver", a, d)));
  EXPECT_FALSE(checkHelloProof(kSecret, "agent", a, d, helloProof(kOtherSecret, "agent", a, d)));
}

TEST(HelloProofTest, ProofCannotBeReflectedToTheOtherRole) {
  const std::string a = randomNonce();
  const std::string d = randomNonce();
  // An impostor driver that echoes the agent's own proof back (or the reverse) fails.
  EXPECT_FALSE(checkHelloProof(kSecret, "agent", a, d, helloProof(kSecret, "driver", a, d)));
  EXPECT_FALSE(checkHelloProof(kSecret, "driver", a, d, helloProof(kSecret, "agent", a, d)));
}

TEST(HelloProofTest, RecordedProofFailsWithFreshNonces) {
  const std::string a = randomNonce();
  const std::string d = randomNonce();
  std::string recorded_agent = helloProof(kSecret, "agent", a, d);
  std::string recorded_driver = helloProof(kSecret, "driver", a, d);
  // Replayed to a driver that picked a new nonce, or to an agent that picked a new one.
  EXPECT_FALSE(checkHelloProof(kSecret, "agent", a, randomNonce(), recorded_agent));
  EXPECT_FALSE(checkHelloProof(kSecret, "driver", randomNonce(), d, recorded_driver));
  // Nonces swapped do not make the same message either.
  EXPECT_FALSE(checkHelloProof(kSecret, "agent", d, a, recorded_agent));
}

TEST(SecretFileTest, ReadsAnOwnerOnlyFileWithoutItsNewline) {
  SecretFile file("0123456789abcdef0123\n", 0600);
  ClusterSecret secret = loadSecretFile(file.path());
  EXPECT_EQ(secret.mac("x"), ClusterSecret("0123456789abcdef0123").mac("x"));
  SecretFile read_only("0123456789abcdef0123", 0400);
  EXPECT_EQ(loadSecretFile(read_only.path()).mac("x"), secret.mac("x"));
}

TEST(SecretFileTest, RefusesFilesOthersCanRead) {
  for (mode_t mode : {0644, 0640, 0604, 0660, 0602}) {
    SecretFile file("0123456789abcdef0123", mode);
    std::string why = refusalOf(file.path());
    EXPECT_NE(why.find(file.path()), std::string::npos) << why;
    EXPECT_NE(why.find("group or others"), std::string::npos) << why;
    EXPECT_NE(why.find("chmod 600"), std::string::npos) << why;
    EXPECT_EQ(why.find("0123456789abcdef"), std::string::npos) << "secret in message: " << why;
  }
}

TEST(SecretFileTest, RefusesShortMissingAndNonRegularFiles) {
  SecretFile short_file("short\n", 0600);
  EXPECT_NE(refusalOf(short_file.path()).find("at least 16"), std::string::npos);
  EXPECT_NE(refusalOf("/nonexistent/dockhand/secret").find("cannot open"), std::string::npos);
  EXPECT_NE(refusalOf("/dev/null").find("not a regular file"), std::string::npos);
  SecretFile big(std::string(kMaxSecretBytes + 10, 'x'), 0600);
  EXPECT_NE(refusalOf(big.path()).find("at most"), std::string::npos);
  SecretFile target("0123456789abcdef0123", 0600);
  std::string link = target.path() + "-link";
  ASSERT_EQ(::symlink(target.path().c_str(), link.c_str()), 0);
  EXPECT_NE(refusalOf(link).find("symbolic link"), std::string::npos);
  ::unlink(link.c_str());
}

const RequestToSign kGet{"GET", "/blocks/rdd_1_2", ""};

TEST(RequestVerifierTest, AcceptsACorrectlySignedRequestOnce) {
  RequestVerifier verifier(kSecret, 60000);
  std::string header = signRequest(kSecret, kGet, 1'000'000, randomNonce());
  EXPECT_EQ(header.rfind("Dockhand-HMAC-SHA256 ts=1000000,nonce=", 0), 0u) << header;
  EXPECT_TRUE(verifier.verify(header, kGet, 1'000'500).ok());
  auto replay = verifier.verify(header, kGet, 1'000'600);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.error().message.find("replayed"), std::string::npos) << replay.error().message;
}

TEST(RequestVerifierTest, RefusesUnsignedWrongSecretAndAlteredRequests) {
  RequestVerifier verifier(kSecret, 60000);
  auto unsigned_request = verifier.verify("", kGet, 1000);
  ASSERT_FALSE(unsigned_request.ok());
  EXPECT_NE(unsigned_request.error().message.find("requires signed requests"), std::string::npos);
  auto wrong = verifier.verify(signRequest(kOtherSecret, kGet, 1000, randomNonce()), kGet, 1000);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("does not match"), std::string::npos)
      << wrong.error().message;
  // Signed for one block, sent for another; signed for GET, sent as PUT; checksum changed.
  std::string header = signRequest(kSecret, kGet, 1000, randomNonce());
  EXPECT_FALSE(verifier.verify(header, {"GET", "/blocks/rdd_1_3", ""}, 1000).ok());
  EXPECT_FALSE(verifier.verify(header, {"PUT", "/blocks/rdd_1_2", ""}, 1000).ok());
  RequestToSign put{"PUT", "/blocks/rdd_1_2", "xxh64:0000000000000001"};
  std::string put_header = signRequest(kSecret, put, 1000, randomNonce());
  EXPECT_FALSE(
      verifier.verify(put_header, {"PUT", "/blocks/rdd_1_2", "xxh64:0000000000000002"}, 1000).ok());
  EXPECT_TRUE(verifier.verify(put_header, put, 1000).ok());
}

TEST(RequestVerifierTest, RefusesTimestampsOutsideTheSkewWindow) {
  RequestVerifier verifier(kSecret, 60000);
  auto old = verifier.verify(signRequest(kSecret, kGet, 1'000'000, randomNonce()), kGet,
                             1'000'000 + 60001);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("synchronize the clocks"), std::string::npos)
      << old.error().message;
  EXPECT_FALSE(
      verifier.verify(signRequest(kSecret, kGet, 1'070'000, randomNonce()), kGet, 1'000'000).ok());
  EXPECT_TRUE(
      verifier.verify(signRequest(kSecret, kGet, 1'059'000, randomNonce()), kGet, 1'000'000).ok());
}

TEST(RequestVerifierTest, RefusesMalformedHeadersWithTheReason) {
  RequestVerifier verifier(kSecret, 60000);
  const std::string nonce(32, 'a');
  const std::string mac(64, 'b');
  const std::vector<std::string> headers = {
      "Basic dXNlcjpwYXNz",
      "Dockhand-HMAC-SHA256",
      "Dockhand-HMAC-SHA256 ts=x,nonce=" + nonce + ",mac=" + mac,
      "Dockhand-HMAC-SHA256 ts=1,nonce=zz,mac=" + mac,
      "Dockhand-HMAC-SHA256 ts=1,nonce=" + nonce + ",mac=12",
      "Dockhand-HMAC-SHA256 garbage",
      std::string(5000, ',')};
  for (const std::string& header : headers) {
    auto why = verifier.verify(header, kGet, 1);
    ASSERT_FALSE(why.ok()) << header;
    EXPECT_FALSE(why.error().message.empty());
  }
}

TEST(RequestVerifierTest, ForgetsNoncesOnlyOnceTheirTimestampExpired) {
  RequestVerifier verifier(kSecret, 1000, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(
        verifier.verify(signRequest(kSecret, kGet, 10'000, randomNonce()), kGet, 10'000).ok());
  }
  // Full: a fourth within the window is refused rather than forgetting a live nonce.
  auto full = verifier.verify(signRequest(kSecret, kGet, 10'000, randomNonce()), kGet, 10'000);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message.find("too many"), std::string::npos) << full.error().message;
  // Once their timestamps are out of the window they are forgotten and room is back.
  EXPECT_TRUE(
      verifier.verify(signRequest(kSecret, kGet, 11'500, randomNonce()), kGet, 11'500).ok());
  EXPECT_EQ(verifier.remembered(), 1u);
}

}  // namespace
}  // namespace dockhand::protocol::auth
