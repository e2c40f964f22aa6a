// The `tls` config section and the words for a TLS failure: no OpenSSL and no Poco NetSSL here,
// so every program links this and loads the TLS module only when TLS is on (tls_module.h).
#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <set>

#include <Poco/Exception.h>
#include <fmt/format.h>

#include "dockhand/tls/tls.h"

namespace dockhand::tls {

using nlohmann::json;
using protocol::JsonPathError;
using protocol::JsonReader;

namespace {

const std::set<std::string, std::less<>> kKeys = {
    "enabled", "certificate_file",           "private_key_file",
    "ca_file", "require_client_certificate", "verify_hostname",
};

// Runs one read of a JsonReader, turning its error into a recorded problem.
template <typename Read, typename T>
T guarded(std::vector<JsonPathError>& problems, Read read, T fallback) {
  try {
    return read();
  } catch (const JsonPathError& e) {
    problems.push_back(e);
    return fallback;
  }
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

bool isTlsException(const Poco::Exception& e) {
  // Poco's SSLException and its subclasses, by the name of their type (typeid's, as Poco's
  // className() gives it): catching them by type would link libPocoNetSSL into every program.
  static constexpr std::array<const char*, 5> kTlsExceptions = {
      "N4Poco3Net12SSLExceptionE", "N4Poco3Net19SSLContextExceptionE",
      "N4Poco3Net27InvalidCertificateExceptionE", "N4Poco3Net30CertificateValidationExceptionE",
      "N4Poco3Net40SSLConnectionUnexpectedlyClosedExceptionE"};
  const char* name = e.className();
  return std::any_of(kTlsExceptions.begin(), kTlsExceptions.end(),
                     [name](const char* known) { return std::strcmp(name, known) == 0; });
}

const std::vector<std::string>& tlsConfigKeys() {
  static const std::vector<std::string> kKeys = {
      "enabled", "certificate_file",           "private_key_file",
      "ca_file", "require_client_certificate", "verify_hostname"};
  return kKeys;
}

TlsConfig readTlsConfig(const json& value, const std::string& at,
                        std::vector<JsonPathError>& problems, TlsConfig base) {
  TlsConfig c = std::move(base);
  if (!value.is_object()) {
    problems.emplace_back(at, fmt::format("expected an object, got {}", value.type_name()));
    return c;
  }
  JsonReader r(value, at);
  for (const auto& item : value.items()) {
    if (kKeys.count(item.key()) != 0) continue;
    std::string list;
    for (const auto& k : tlsConfigKeys()) list += (list.empty() ? "" : ", ") + k;
    problems.emplace_back(r.childPath(item.key()),
                          fmt::format("unknown key (known keys: {})", list));
  }
  c.enabled = guarded(
      problems, [&] { return r.optionalBool("enabled", true); }, true);
  auto text = [&](const char* key, const std::string& fallback) {
    return guarded(
        problems, [&] { return r.optionalString(key, fallback); }, fallback);
  };
  c.certificate_file = text("certificate_file", c.certificate_file);
  c.private_key_file = text("private_key_file", c.private_key_file);
  c.ca_file = text("ca_file", c.ca_file);
  c.require_client_certificate = guarded(
      problems,
      [&] { return r.optionalBool("require_client_certificate", c.require_client_certificate); },
      c.require_client_certificate);
  c.verify_hostname = guarded(
      problems, [&] { return r.optionalBool("verify_hostname", c.verify_hostname); },
      c.verify_hostname);
  return c;
}

std::vector<std::pair<std::string, std::string>> tlsConfigProblems(const TlsConfig& config,
                                                                   bool serves) {
  std::vector<std::pair<std::string, std::string>> problems;
  if (!config.enabled) return problems;
  if (config.ca_file.empty()) {
    problems.emplace_back("ca_file",
                          "is required with TLS on: the CA certificates (PEM) peers' "
                          "certificates must chain to");
  }
  if (serves && config.certificate_file.empty()) {
    problems.emplace_back("certificate_file",
                          "is required with TLS on: this side serves TLS with it (and "
                          "private_key_file)");
  } else if (config.certificate_file.empty() != config.private_key_file.empty()) {
    problems.emplace_back(config.certificate_file.empty() ? "certificate_file" : "private_key_file",
                          "goes with the other of certificate_file and private_key_file");
  }
  return problems;
}

json tlsConfigToJson(const TlsConfig& config) {
  return json{{"enabled", config.enabled},
              {"certificate_file", config.certificate_file},
              {"private_key_file", config.private_key_file},
              {"ca_file", config.ca_file},
              {"require_client_certificate", config.require_client_certificate},
              {"verify_hostname", config.verify_hostname}};
}

bool isCertificateFailure(const Poco::Exception& e) {
  if (isTlsException(e)) return true;
  const std::string text = lower(e.displayText());
  return text.find("certificate") != std::string::npos || text.find("ssl") != std::string::npos;
}

std::string explainFailure(const Poco::Exception& e) {
  const std::string text = e.displayText();
  const std::string l = lower(text);
  std::string hint;
  if (l.find("unacceptable certificate") != std::string::npos ||
      l.find("application verification failure") != std::string::npos) {
    hint =
        "the peer's certificate does not name the host connected to (its subjectAltName "
        "lacks that DNS name or IP address; see tls.verify_hostname)";
  } else if (l.find("certificate verify failed") != std::string::npos) {
    hint = "the peer's certificate is not signed by a CA in tls.ca_file, or it has expired";
  } else if (l.find("certificate required") != std::string::npos ||
             l.find("peer did not return a certificate") != std::string::npos) {
    hint =
        "the server requires a client certificate (the client's tls.certificate_file and "
        "tls.private_key_file), signed by a CA the server trusts";
  } else if (l.find("unknown ca") != std::string::npos ||
             l.find("bad certificate") != std::string::npos) {
    hint = "the peer refused this side's certificate: it is not signed by a CA the peer trusts";
  } else if (l.find("wrong version number") != std::string::npos ||
             l.find("http request") != std::string::npos ||
             l.find("packet length too long") != std::string::npos ||
             l.find("record layer failure") != std::string::npos) {
    hint = "the peer does not speak TLS here (a plain ws:// or http:// endpoint?)";
  } else if (l.find("unexpectedly closed") != std::string::npos) {
    hint =
        "the peer closed the connection during the TLS handshake (it may have refused "
        "this side's certificate, or it does not speak TLS)";
  }
  return hint.empty() ? text : text + ": " + hint;
}

}  // namespace dockhand::tls
