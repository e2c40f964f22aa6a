#include "dockhand/tls/tls.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include <Poco/Exception.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/NetSSL.h>
#include <Poco/Net/RejectCertificateHandler.h>
#include <Poco/Net/SSLException.h>
#include <Poco/Net/SSLManager.h>
#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

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

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

// The whole file, or TlsError "<key> <path>: cannot open: <errno text>".
std::string readWhole(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw TlsError(fmt::format("tls.{} {}: cannot open: {}", key, path, std::strerror(errno)));
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

BioPtr memoryBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// A passphrase callback that has none to give: an encrypted key fails to load.
int noPassphrase(char*, int, int, void*) { return -1; }

std::string asn1TimeText(const ASN1_TIME* time) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), time);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(std::max(0L, n)));
}

X509Ptr checkCertificate(const std::string& path) {
  const std::string text = readWhole("certificate_file", path);
  auto bio = memoryBio(text);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!cert) {
    throw TlsError(
        fmt::format("tls.certificate_file {}: holds no PEM certificate "
                    "(expected -----BEGIN CERTIFICATE-----)",
                    path));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
    throw TlsError(fmt::format("tls.certificate_file {}: the certificate expired on {}", path,
                               asn1TimeText(X509_get0_notAfter(cert.get()))));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert.get())) > 0) {
    throw TlsError(fmt::format("tls.certificate_file {}: the certificate is not valid before {}",
                               path, asn1TimeText(X509_get0_notBefore(cert.get()))));
  }
  return cert;
}

KeyPtr checkPrivateKey(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw TlsError(
        fmt::format("tls.private_key_file {}: cannot open: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw TlsError(fmt::format("tls.private_key_file {}: is not a regular file", path));
  }
  if ((st.st_mode & 077) != 0) {
    throw TlsError(fmt::format(
        "tls.private_key_file {}: is accessible by group or others (mode {:04o}); it must be "
        "readable by its owner only: chmod 600 {}",
        path, st.st_mode & 07777, path));
  }
  const std::string text = readWhole("private_key_file", path);
  if (text.find("ENCRYPTED") != std::string::npos) {
    throw TlsError(
        fmt::format("tls.private_key_file {}: is encrypted with a passphrase, which "
                    "dockhand cannot ask for; store it unencrypted (owner-only): "
                    "openssl pkey -in {} -out NEW_FILE",
                    path, path));
  }
  auto bio = memoryBio(text);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, noPassphrase, nullptr));
  ERR_clear_error();
  if (!key) {
    throw TlsError(
        fmt::format("tls.private_key_file {}: holds no PEM private key "
                    "(expected -----BEGIN PRIVATE KEY-----)",
                    path));
  }
  return key;
}

void checkCaFile(const std::string& path) {
  const std::string text = readWhole("ca_file", path);
  auto bio = memoryBio(text);
  int count = 0;
  while (X509Ptr cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) ++count;
  ERR_clear_error();
  if (count == 0) {
    throw TlsError(
        fmt::format("tls.ca_file {}: holds no PEM certificate "
                    "(expected -----BEGIN CERTIFICATE-----)",
                    path));
  }
}

// Installed once per copy of this library (the agent's, the peer plugin's): Poco asks
// SSLManager what to do about a certificate that failed verification, and the answer must be
// "refuse", never a console prompt or an accept. The handler classes are Poco's own, so no
// pointer into a plugin's code is left behind when a plugin is unloaded.
void installRefusingHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    Poco::Net::initializeSSL();
    Poco::Net::SSLManager::instance().initializeServer(
        nullptr, new Poco::Net::RejectCertificateHandler(true), Poco::Net::Context::Ptr());
    Poco::Net::SSLManager::instance().initializeClient(
        nullptr, new Poco::Net::RejectCertificateHandler(false), Poco::Net::Context::Ptr());
  });
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

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

void checkTlsFiles(const TlsConfig& config, Role role) {
  if (config.ca_file.empty()) throw TlsError("tls.ca_file: is required with TLS on");
  if (role == Role::kServer && config.certificate_file.empty()) {
    throw TlsError("tls.certificate_file: is required to serve TLS (with tls.private_key_file)");
  }
  if (config.certificate_file.empty() != config.private_key_file.empty()) {
    throw TlsError("tls.certificate_file and tls.private_key_file: give both or neither");
  }
  if (!config.certificate_file.empty()) {
    X509Ptr cert = checkCertificate(config.certificate_file);
    KeyPtr key = checkPrivateKey(config.private_key_file);
    if (X509_check_private_key(cert.get(), key.get()) != 1) {
      ERR_clear_error();
      throw TlsError(
          fmt::format("tls.private_key_file {}: does not match the certificate in "
                      "tls.certificate_file {}",
                      config.private_key_file, config.certificate_file));
    }
  }
  checkCaFile(config.ca_file);
}

Poco::Net::Context::Ptr makeContext(const TlsConfig& config, Role role) {
  checkTlsFiles(config, role);
  installRefusingHandlers();
  using Poco::Net::Context;
  Context::Params params;
  params.certificateFile = config.certificate_file;
  params.privateKeyFile = config.private_key_file;
  params.caLocation = config.ca_file;
  params.loadDefaultCAs = false;
  params.verificationDepth = 9;
  params.cipherList = "HIGH:!aNULL:!eNULL:!MD5:!RC4:!3DES:@STRENGTH";
  if (role == Role::kServer) {
    params.verificationMode =
        config.require_client_certificate ? Context::VERIFY_STRICT : Context::VERIFY_NONE;
  } else {
    // STRICT: for a client it verifies the chain as RELAXED does, and it keeps Poco from
    // skipping the host name check for loopback addresses.
    params.verificationMode = Context::VERIFY_STRICT;
  }
  Context::Ptr context;
  try {
    context = new Context(role == Role::kServer ? Context::TLS_SERVER_USE : Context::TLS_CLIENT_USE,
                          params);
    context->requireMinimumProtocol(Context::PROTO_TLSV1_2);
  } catch (const Poco::Exception& e) {
    throw TlsError(
        fmt::format("tls: cannot set up a {} context from {}, {}, {}: {}",
                    role == Role::kServer ? "server" : "client",
                    config.certificate_file.empty() ? "(no certificate)" : config.certificate_file,
                    config.private_key_file.empty() ? "(no key)" : config.private_key_file,
                    config.ca_file, e.displayText()));
  }
  if (role == Role::kServer) {
    // Clients are known by the CA that signed their certificate, not by their address.
    context->enableExtendedCertificateVerification(false);
    // No session tickets: after the handshake nothing arrives that is not application data,
    // so a reader that saw the socket readable never waits on a ticket alone.
    SSL_CTX_set_options(context->sslContext(), SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(context->sslContext(), 0);
  } else {
    context->enableExtendedCertificateVerification(config.verify_hostname);
  }
  return context;
}

bool isCertificateFailure(const Poco::Exception& e) {
  if (dynamic_cast<const Poco::Net::SSLException*>(&e) != nullptr) return true;
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
