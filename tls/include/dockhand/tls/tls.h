// TLS for the agent's and the driver's connections: the `tls` config section, the checks of
// its files, and the Poco::Net::Context of each role, built from that section alone.
//
// Nothing here reads Poco's global SSLManager configuration (no Poco::Util::Application
// settings, no default contexts): every server and client is handed the context made for it.
// The one global this installs, once, is what Poco asks SSLManager when a certificate does not
// verify: Poco's RejectCertificateHandler, for servers and clients (never one that asks on a
// console or accepts). No passphrase handler is installed: an encrypted key is refused by
// checkTlsFiles before Poco would ask for one.
//
// Used by the agent (driver link, block server, input fetches), the driver (agent server,
// its CLI's control requests) and the `peer` plugin (its PUTs), which links this statically.
//
// What needs OpenSSL (checkTlsFiles, makeContext, nonBlockingStream, and the TLS side of
// newClientSession and HttpServer) lives in the TLS module, libdockhand-tls.so, which the first
// such call loads (tls/src/tls_module.h): a program that never turns TLS on never maps OpenSSL
// or Poco's NetSSL. If the module cannot be loaded, those calls throw TlsError saying where it
// was looked for and why each place failed.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <nlohmann/json.hpp>

#include "dockhand/protocol/json_reader.h"

namespace Poco {
class Exception;
}

namespace dockhand::tls {

// The `tls` object of the agent's and the driver's config (docs/security.md).
struct TlsConfig {
  bool enabled = false;
  // This side's certificate chain (PEM, leaf first) and its unencrypted private key (PEM,
  // readable by its owner only). Required to serve (driver, agent block server); a client
  // presents them when the server requires client certificates.
  std::string certificate_file;
  std::string private_key_file;
  // The CA certificates (PEM) peers' certificates must chain to: servers' for a client,
  // clients' for a server that requires client certificates. The system's CAs are not used.
  std::string ca_file;
  // Servers: ask every client for a certificate signed by ca_file and refuse those without.
  bool require_client_certificate = false;
  // Clients: the server's certificate must name the host connected to (its subjectAltName
  // DNS or IP entries). Off only for tests and odd networks; the chain is checked anyway.
  bool verify_hostname = true;
};

// The keys of a `tls` object, in the order docs list them.
const std::vector<std::string>& tlsConfigKeys();

// Reads a `tls` object found at JSON pointer `at` (e.g. "/tls") over `base` (the keys it holds
// replace base's; `enabled` is true unless the object says otherwise). Every problem (unknown
// key, wrong type) is appended to `problems` with its pointer; the values that could be read
// are returned.
TlsConfig readTlsConfig(const nlohmann::json& value, const std::string& at,
                        std::vector<protocol::JsonPathError>& problems, TlsConfig base = {});

// The rules about a whole section, once every source is read: with TLS on, ca_file is
// required, and certificate_file and private_key_file go together (servers need both:
// `serves`). Each problem is (key, message).
std::vector<std::pair<std::string, std::string>> tlsConfigProblems(const TlsConfig& config,
                                                                   bool serves);

// The section as a config file holds it.
nlohmann::json tlsConfigToJson(const TlsConfig& config);

// A TLS file is unusable, or a context cannot be made; what() says which file and why, e.g.
// "tls.private_key_file /etc/dockhand/agent.key: does not match tls.certificate_file ...".
class TlsError : public std::runtime_error {
 public:
  explicit TlsError(const std::string& what) : std::runtime_error(what) {}
};

enum class Role { kServer, kClient };

// Reads and checks the files a role needs: the certificate (PEM, not expired) and the key
// (PEM, unencrypted, owner-only, matching the certificate) when the role needs or has them,
// the CA file (at least one PEM certificate). Throws TlsError.
void checkTlsFiles(const TlsConfig& config, Role role);

// The context of a server (certificate and key required; client certificates verified
// against ca_file when require_client_certificate) or a client (servers verified against
// ca_file, host names checked unless verify_hostname is off; the certificate presented when
// configured). TLS 1.2 or newer. Checks the files first; throws TlsError.
Poco::Net::Context::Ptr makeContext(const TlsConfig& config, Role role);

// A client session to host:port: https:// over `context`, or plain http:// when it is null.
// Throws TlsError when TLS is asked for and the module cannot be loaded.
std::unique_ptr<Poco::Net::HTTPClientSession> newClientSession(
    const std::string& host, std::uint16_t port, const Poco::Net::Context::Ptr& context);

// A socket bound to `address` (reusing it) and listening. Its connections are plain TCP: an
// HttpServer given a server context does their TLS handshake (http_server.h). Poco's exceptions
// when it cannot bind.
Poco::Net::ServerSocket newServerSocket(const Poco::Net::SocketAddress& address, int backlog);

// The bytes of a server-side TLS connection, read and written without ever waiting (the
// driver's connection reactor serves wss:// agents with it, after HttpServer's pool thread has
// done the handshake and the WebSocket upgrade). A call that cannot go on until the socket is
// readable or writable says so (kWantRead, kWantWrite): poll for that, then call it again. A
// write may take part of what it is given; it is then called again with the rest (the buffer may
// have moved and grown). The connection stays owned by its socket. OpenSSL writes with write(2):
// the thread that calls write() blocks or ignores SIGPIPE, or a peer that has gone ends the
// process.
class NonBlockingStream {
 public:
  enum class Status {
    kDone,       // `bytes` read or written
    kWantRead,   // call again once the socket is readable
    kWantWrite,  // call again once the socket is writable
    kClosed,     // the peer closed the connection (with or without TLS close_notify)
    kFailed,     // `error` says why; the connection is of no more use
  };
  struct Io {
    Status status = Status::kDone;
    std::size_t bytes = 0;
    std::string error;
  };
  virtual Io read(char* data, std::size_t size) = 0;
  virtual Io write(const char* data, std::size_t size) = 0;
  // Decrypted bytes wait in the TLS layer: read them, the socket will not say so.
  virtual bool pending() const = 0;
  // Sends TLS close_notify (once, as far as the socket takes it now).
  virtual void closeNotify() = 0;

 protected:
  NonBlockingStream() = default;
  ~NonBlockingStream() = default;
  NonBlockingStream(const NonBlockingStream&) = default;
  NonBlockingStream& operator=(const NonBlockingStream&) = default;
};

// The connection under `socket` (a socket an HttpServer with a server context served, or a
// WebSocket made from its request) switched to non-blocking use for good, as a NonBlockingStream
// that lives as long as the socket's implementation; nullptr for any other socket. Throws
// TlsError when the TLS module cannot be loaded.
NonBlockingStream* nonBlockingStream(const Poco::Net::StreamSocket& socket);

// Ed25519 signatures (signed plugins, docs/plugins.md "Trust"), in the TLS module too: the raw
// 64-byte signature of `data` by a PEM private key (`openssl genpkey -algorithm ed25519`), and
// whether `signature` is one by a PEM public key. Throw TlsError for a key that is not an
// Ed25519 key of that kind (or a module that cannot be loaded); a signature that does not
// verify is false, not an error.
std::string signEd25519(const std::string& private_key_pem, std::string_view data);
bool verifyEd25519(const std::string& public_key_pem, std::string_view data,
                   std::string_view signature);

// True for Poco's TLS exceptions (Poco::Net::SSLException and its subclasses). Code outside the
// TLS module catches Poco::Exception and asks this, since catching by those types would link
// Poco's NetSSL.
bool isTlsException(const Poco::Exception& e);

// A TLS failure said for a log line: Poco's text plus what it most likely means, e.g.
// "certificate verify failed: the peer's certificate is not signed by a CA in tls.ca_file".
std::string explainFailure(const Poco::Exception& e);
// True when `e` is a failure of the TLS handshake or of certificate checks (not worth a retry
// with the same settings).
bool isCertificateFailure(const Poco::Exception& e);

}  // namespace dockhand::tls
