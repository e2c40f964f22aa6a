// Test support: a throwaway public-key infrastructure for the TLS tests, made at test time with
// the `openssl` program in a directory of the test's own (nothing is checked in, nothing
// outlives the test). EC P-256 keys, so that making one takes milliseconds.
//
//   ca.pem / ca.key                 the cluster's CA
//   server.pem / server.key         signed by the CA; subjectAltName IP:127.0.0.1, DNS:localhost;
//                                   serverAuth and clientAuth (the driver's and agents' cert)
//   client.pem / client.key         signed by the CA; clientAuth only
//   wrong-host.pem / wrong-host.key signed by the CA; names only DNS:wrong.example
//   other-ca.pem / other-ca.key     a second CA nobody trusts
//   untrusted.pem / untrusted.key   signed by the other CA; names 127.0.0.1 and localhost
//
// Keys are mode 0600 (the agent and the driver refuse keys others can read).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dockhand::testing {

class TestPki {
 public:
  // Makes every file above under `dir` (created if missing). Throws std::runtime_error with
  // openssl's output when a step fails.
  explicit TestPki(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  // dir/<name>.pem, dir/<name>.key
  std::string cert(const std::string& name) const { return (dir_ / (name + ".pem")).string(); }
  std::string key(const std::string& name) const { return (dir_ / (name + ".key")).string(); }

  // A `tls` config object (JSON text) with `name`'s certificate and key, trusting `ca`.
  std::string tlsJson(const std::string& name, const std::string& ca = "ca",
                      const std::string& extra = "") const;

  // Runs openssl with `args` in dir(); throws std::runtime_error with its output on failure.
  void openssl(const std::vector<std::string>& args) const;

  // Whether the openssl program can be found (tests skip without it).
  static bool available();

 private:
  void makeCa(const std::string& name, const std::string& subject) const;
  void makeLeaf(const std::string& name, const std::string& ca, const std::string& subject,
                const std::string& alt_names, const std::string& usage, int serial) const;

  std::filesystem::path dir_;
};

}  // namespace dockhand::testing
