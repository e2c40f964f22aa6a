#include "support/test_pki.h"

#include <cstdlib>
#include <stdexcept>

#include "support/process.h"

namespace dockhand::testing {

namespace fs = std::filesystem;

namespace {

std::string findOpenssl() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    fs::path candidate = fs::path(dirs.substr(start, end - start)) / "openssl";
    std::error_code ec;
    if (!candidate.empty() && fs::is_regular_file(candidate, ec)) return candidate.string();
    start = end + 1;
  }
  return {};
}

}  // namespace

bool TestPki::available() { return !findOpenssl().empty(); }

TestPki::TestPki(fs::path dir) : dir_(std::move(dir)) {
  fs::create_directories(dir_);
  makeCa("ca", "/CN=Dockhand Test CA");
  makeCa("other-ca", "/CN=Untrusted Test CA");
  makeLeaf("server", "ca", "/CN=127.0.0.1", "IP:127.0.0.1,DNS:localhost", "serverAuth,clientAuth",
           2);
  makeLeaf("client", "ca", "/CN=dockhand client", "DNS:client.invalid", "clientAuth", 3);
  makeLeaf("wrong-host", "ca", "/CN=wrong.example", "DNS:wrong.example", "serverAuth,clientAuth",
           4);
  makeLeaf("untrusted", "other-ca", "/CN=127.0.0.1", "IP:127.0.0.1,DNS:localhost",
           "serverAuth,clientAuth", 5);
}

void TestPki::openssl(const std::vector<std::string>& args) const {
  const std::string program = findOpenssl();
  if (program.empty()) throw std::runtime_error("the openssl program is not on PATH");
  std::vector<std::string> argv = {"/bin/sh", "-c", R"(cd "$0" && exec "$@")", dir_.string(),
                                   program};
  argv.insert(argv.end(), args.begin(), args.end());
  const fs::path log = dir_ / "openssl.log";
  std::error_code ec;
  fs::remove(log, ec);
  ChildProcess child(argv, log.string());
  auto code = child.waitExit(Millis(20000));
  if (code != 0) {
    std::string line;
    for (const auto& a : args) line += " " + a;
    throw std::runtime_error("openssl" + line + " failed (exit " +
                             (code ? std::to_string(*code) : std::string("none")) +
                             "): " + child.output());
  }
}

void TestPki::makeCa(const std::string& name, const std::string& subject) const {
  openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", subject,
           "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
           "keyUsage=critical,keyCertSign,cRLSign"});
  fs::permissions(dir_ / (name + ".key"), fs::perms::owner_read | fs::perms::owner_write);
}

void TestPki::makeLeaf(const std::string& name, const std::string& ca, const std::string& subject,
                       const std::string& alt_names, const std::string& usage, int serial) const {
  const std::string ext = name + ".ext";
  writeFile(dir_ / ext,
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=" +
                usage + "\nsubjectAltName=" + alt_names + "\n");
  openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject});
  openssl({"x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
           "-set_serial", std::to_string(serial), "-days", "2", "-extfile", ext, "-out",
           name + ".pem"});
  fs::permissions(dir_ / (name + ".key"), fs::perms::owner_read | fs::perms::owner_write);
}

std::string TestPki::tlsJson(const std::string& name, const std::string& ca,
                             const std::string& extra) const {
  return R"({"certificate_file": ")" + cert(name) + R"(", "private_key_file": ")" + key(name) +
         R"(", "ca_file": ")" + cert(ca) + "\"" + (extra.empty() ? "" : ", " + extra) + "}";
}

}  // namespace dockhand::testing
