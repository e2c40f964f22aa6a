// plugin_trust against the real loader and real Ed25519 (OpenSSL through the TLS module): a
// copy of the built-in process plugin, pinned, signed, tampered with, signed by a key the policy
// does not hold.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dockhand/tls/tls.h"
#include "plugins/plugin_library.h"
#include "plugins/plugin_trust.h"

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kPluginDir = DOCKHAND_PLUGIN_DIR;

// Two Ed25519 key pairs made for these tests (openssl genpkey -algorithm ed25519).
constexpr const char* kPrivateA =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEICNTcthLnyaJP2L3AjSQPNrGtAV+BXMZpsnikwO6Gjwc\n"
    "-----END PRIVATE KEY-----\n";
constexpr const char* kPublicA =
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEA+/9Jvzf16fiK2ZPhY5rReovhaVll9VQzKi+gH4MWswU=\n"
    "-----END PUBLIC KEY-----\n";
constexpr const char* kPrivateB =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIDr93RdwSV6Xiy68XL+IEwhfj3lbPan5vp/NTQABDhQH\n"
    "-----END PRIVATE KEY-----\n";

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void writeAll(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  fs::permissions(path, fs::perms(0644));
}

// A directory of the test's own: a copy of the process plugin, a keys directory holding key A,
// a catalog; the "verified" policy over them.
class PluginTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dockhand-trust-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    fs::permissions(dir_, fs::perms(0755));
    plugin_ = dir_ / "dockhand-process.so";
    fs::copy_file(kPluginDir / "dockhand-process.so", plugin_);
    fs::permissions(plugin_, fs::perms(0755));
    fs::create_directory(dir_ / "keys");
    fs::permissions(dir_ / "keys", fs::perms(0755));
    writeAll(dir_ / "keys" / "a.pub", kPublicA);
    trust_.policy = PluginTrust::Policy::kVerified;
    trust_.catalogs = {dir_ / "missing.sha256", dir_ / "plugins.sha256"};
    trust_.keys_dir = dir_ / "keys";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string refusal() {
    try {
      PluginLibrary::open(plugin_, false, trust_);
    } catch (const PluginLoadError& e) {
      return e.what();
    }
    return "loaded";
  }
  void sign(const char* private_key, const std::string& bytes) {
    writeAll(signatureFile(plugin_), signatureFileText(tls::signEd25519(private_key, bytes)));
  }

  fs::path dir_;
  fs::path plugin_;
  PluginTrust trust_;
};

TEST_F(PluginTrustTest, AnyLoadsEveryFileThatPassesTheOwnerAndModeCheck) {
  trust_.policy = PluginTrust::Policy::kAny;
  auto library = PluginLibrary::open(plugin_, false, trust_);
  EXPECT_EQ(library->name(), "process");
  EXPECT_EQ(library->trustedBy(), "any");
}

TEST_F(PluginTrustTest, VerifiedRefusesAFileNeitherPinnedNorSignedAndNamesTheMend) {
  const std::string why = refusal();
  EXPECT_THAT(why, HasSubstr("refused by plugin_trust (policy verified): its SHA-256 " +
                             sha256Hex(readAll(plugin_)) + " is in no catalog"));
  EXPECT_THAT(why, HasSubstr("it has no signature (dockhand-process.so.sig)"));
  EXPECT_THAT(why, HasSubstr("dockhand plugins trust " + plugin_.string()));
  EXPECT_THAT(why, HasSubstr("dockhand plugins sign --key KEY"));
}

TEST_F(PluginTrustTest, ACatalogLinePinsTheBytes) {
  writeAll(dir_ / "plugins.sha256",
           "# pinned by hand\n" + sha256Hex(readAll(plugin_)) + "  " + plugin_.string() + "\n");
  auto library = PluginLibrary::open(plugin_, false, trust_);
  EXPECT_EQ(library->trustedBy(), "catalog " + (dir_ / "plugins.sha256").string());
}

TEST_F(PluginTrustTest, AFileChangedSinceItWasPinnedIsRefused) {
  writeAll(dir_ / "plugins.sha256", sha256Hex(readAll(plugin_)) + "  " + plugin_.string() + "\n");
  std::ofstream(plugin_, std::ios::app) << "one more byte";
  EXPECT_THAT(refusal(), HasSubstr("is in no catalog"));
}

TEST_F(PluginTrustTest, ACatalogOthersMayWriteIsNotRead) {
  writeAll(dir_ / "plugins.sha256", sha256Hex(readAll(plugin_)) + "  x\n");
  fs::permissions(dir_ / "plugins.sha256", fs::perms(0666));
  EXPECT_THAT(refusal(), HasSubstr("writable by group or others"));
}

TEST_F(PluginTrustTest, ASignatureByATrustedKeyLoads) {
  sign(kPrivateA, readAll(plugin_));
  auto library = PluginLibrary::open(plugin_, false, trust_);
  EXPECT_EQ(library->trustedBy(), "signature " + signatureFile(plugin_).string() + " by " +
                                      (dir_ / "keys" / "a.pub").string());
}

TEST_F(PluginTrustTest, ASignatureOfOtherBytesIsRefused) {
  sign(kPrivateA, readAll(plugin_) + "x");
  EXPECT_THAT(refusal(), HasSubstr("dockhand-process.so.sig verifies under none of the 1 key(s)"));
}

TEST_F(PluginTrustTest, ASignatureByAKeyThePolicyDoesNotHoldIsRefused) {
  sign(kPrivateB, readAll(plugin_));
  EXPECT_THAT(refusal(),
              HasSubstr("verifies under none of the 1 key(s) in " + (dir_ / "keys").string()));
}

TEST_F(PluginTrustTest, ASignatureFileThatIsNotOneIsRefusedWithWhy) {
  writeAll(signatureFile(plugin_), "not base64 of anything useful\n");
  EXPECT_THAT(refusal(), HasSubstr("is not a base64 Ed25519 signature (64 bytes)"));
}

// What open() relies on: the loader maps the file a descriptor was opened on, by its /proc
// name, even after another file was renamed over the path (the swap a check-then-load by path
// would miss). The copy is swapped for the fallback plugin after it was opened; the library
// loaded through the descriptor is still the process plugin.
TEST_F(PluginTrustTest, TheLoaderMapsTheOpenedFileNotWhatThePathNamesLater) {
  const int fd = ::open(plugin_.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const fs::path other = dir_ / "other.so";
  fs::copy_file(kPluginDir / "dockhand-fallback.so", other);
  fs::rename(other, plugin_);
  const std::string name = "/proc/self/fd/" + std::to_string(fd);
  void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  using Entry = const dh_plugin_descriptor* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, DH_PLUGIN_ENTRY_SYMBOL));
  ASSERT_NE(entry, nullptr);
  EXPECT_STREQ(entry()->name, "process");
  ::dlclose(handle);
  ::close(fd);
  // And by path, the swapped-in file is what a later open() checks: the fallback plugin, which
  // nothing pins.
  EXPECT_THAT(refusal(), HasSubstr("is in no catalog"));
}

// A library the loader does not unload (the peer plugin, for one) keeps the /proc name it was
// loaded by; the next file opened on the same descriptor number must not be taken for it.
TEST(PluginLibraryTest, EachFileLoadsAsItselfAfterOthersWereUnloaded) {
  for (int round = 0; round < 3; ++round) {
    for (const char* name : {"peer", "fallback", "process"}) {
      auto library = PluginLibrary::open(kPluginDir / ("dockhand-" + std::string(name) + ".so"));
      EXPECT_EQ(library->name(), name) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace dockhand::agent
