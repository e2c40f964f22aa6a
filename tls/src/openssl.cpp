// The part of TLS that needs OpenSSL and Poco's NetSSL: the checks of the files, the contexts,
// client sessions and signatures (the server side of a connection is server_stream.cpp). Built
// into the TLS module (libdockhand-tls.so) only, which a program loads when its TLS is on
// (tls_module.h).
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include <Poco/Exception.h>
#include <Poco/Net/HTTPSClientSession.h>
#include <Poco/Net/NetSSL.h>
#include <Poco/Net/RejectCertificateHandler.h>
#include <Poco/Net/SSLManager.h>
#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls_module.h"

namespace dockhand::tls::module {

namespace {

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

// Installed once per process (the module is loaded once, whoever asks for it): Poco asks
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

}  // namespace

void checkFiles(const TlsConfig& config, Role role) {
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

std::string takeOpensslError(const char* fallback) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return fallback;
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

Poco::Net::Context::Ptr newContext(const TlsConfig& config, Role role) {
  checkFiles(config, role);
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

namespace {

std::unique_ptr<Poco::Net::HTTPClientSession> clientSession(
    const std::string& host, std::uint16_t port, const Poco::Net::Context::Ptr& context) {
  return std::make_unique<Poco::Net::HTTPSClientSession>(host, port, context);
}

// An Ed25519 key from PEM text: a private key (`private_key`) or a public one.
KeyPtr ed25519Key(const std::string& pem, bool private_key) {
  ERR_clear_error();
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr key(private_key ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                         : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  const char* what = private_key ? "private" : "public";
  if (!key)
    throw TlsError(fmt::format("not a PEM {} key: {}", what, takeOpensslError("no detail")));
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) {
    throw TlsError(
        fmt::format("a {} key, but not an Ed25519 one (openssl genpkey -algorithm "
                    "ed25519 makes one)",
                    what));
  }
  return key;
}

struct MdContextDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

std::string signEd25519(const std::string& private_key_pem, std::string_view data) {
  KeyPtr key = ed25519Key(private_key_pem, /*private_key=*/true);
  std::unique_ptr<EVP_MD_CTX, MdContextDeleter> context(EVP_MD_CTX_new());
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t size = 0;
  if (!context || EVP_DigestSignInit(context.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(context.get(), nullptr, &size, bytes, data.size()) != 1) {
    throw TlsError("cannot sign: " + takeOpensslError("no detail"));
  }
  std::string signature(size, '\0');
  if (EVP_DigestSign(context.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     bytes, data.size()) != 1) {
    throw TlsError("cannot sign: " + takeOpensslError("no detail"));
  }
  signature.resize(size);
  return signature;
}

bool verifyEd25519(const std::string& public_key_pem, std::string_view data,
                   std::string_view signature) {
  KeyPtr key = ed25519Key(public_key_pem, /*private_key=*/false);
  std::unique_ptr<EVP_MD_CTX, MdContextDeleter> context(EVP_MD_CTX_new());
  if (!context || EVP_DigestVerifyInit(context.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    throw TlsError("cannot verify: " + takeOpensslError("no detail"));
  }
  const int verified = EVP_DigestVerify(
      context.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
      reinterpret_cast<const unsigned char*>(data.data()), data.size());
  ERR_clear_error();
  return verified == 1;
}

constexpr Api kApi = {kApiVersion,        DOCKHAND_VERSION, &checkFiles,
                      &newContext,        &clientSession,   &handshakeFirstFactory,
                      &nonBlockingStream, &signEd25519,     &verifyEd25519};

}  // namespace

}  // namespace dockhand::tls::module

// The module's entry: the one symbol it exports (the target hides the rest).
extern "C" __attribute__((visibility("default"))) const void* dockhand_tls_module_api() {
  return &dockhand::tls::module::kApi;
}
