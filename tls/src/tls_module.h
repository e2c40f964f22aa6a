// The TLS module (libdockhand-tls.so): everything that needs OpenSSL and Poco's NetSSL, behind
// one table of functions. Programs and the `peer` plugin link only the rest of TLS (config.cpp,
// http_server.cpp, front.cpp), and front.cpp loads this module the first time TLS is used, so an
// agent without TLS never maps libssl, libcrypto or NetSSL (and the Poco Util, XML and JSON
// libraries NetSSL pulls in): about 3.5 MiB of resident memory.
//
// The table is C++ and built with the programs from one tree: the module is refused unless it
// was built for the same version (kApiVersion and the version string both match).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/Net/TCPServerConnectionFactory.h>

#include "dockhand/tls/http_server.h"
#include "dockhand/tls/tls.h"

// The module's one exported symbol: returns its `const dockhand::tls::module::Api*`.
#define DOCKHAND_TLS_MODULE_ENTRY "dockhand_tls_module_api"

namespace dockhand::tls::module {

// Raised when a field of Api changes meaning or a field is added.
inline constexpr int kApiVersion = 3;

struct Api {
  int api_version;
  const char* version;  // DOCKHAND_VERSION of the build
  void (*check_files)(const TlsConfig& config, Role role);
  Poco::Net::Context::Ptr (*make_context)(const TlsConfig& config, Role role);
  std::unique_ptr<Poco::Net::HTTPClientSession> (*client_session)(
      const std::string& host, std::uint16_t port, const Poco::Net::Context::Ptr& context);
  // Since 3: the server side of TLS is the module's own (server_stream.cpp), so that the
  // driver's reactor can serve a connection without blocking (non_blocking_stream).
  Poco::Net::TCPServerConnectionFactory* (*handshake_first_factory)(
      const Poco::Net::HTTPServerParams::Ptr& params,
      const Poco::Net::HTTPRequestHandlerFactory::Ptr& factory,
      const Poco::Net::Context::Ptr& context, HandshakeLog log);
  NonBlockingStream* (*non_blocking_stream)(const Poco::Net::StreamSocket& socket);
  // Since 2: Ed25519 signatures (tls.h).
  std::string (*sign_ed25519)(const std::string& private_key_pem, std::string_view data);
  bool (*verify_ed25519)(const std::string& public_key_pem, std::string_view data,
                         std::string_view signature);
};

// The implementations, in openssl.cpp.
// OpenSSL's first queued error as one line, the queue emptied; `fallback` when it is empty.
std::string takeOpensslError(const char* fallback);
void checkFiles(const TlsConfig& config, Role role);
Poco::Net::Context::Ptr newContext(const TlsConfig& config, Role role);
// In server_stream.cpp: each accepted connection's TLS handshake, then HTTP as Poco's
// HTTPServer serves it, over the module's own TLS socket; and that socket's non-blocking view.
Poco::Net::TCPServerConnectionFactory* handshakeFirstFactory(
    const Poco::Net::HTTPServerParams::Ptr& params,
    const Poco::Net::HTTPRequestHandlerFactory::Ptr& factory,
    const Poco::Net::Context::Ptr& context, HandshakeLog log);
NonBlockingStream* nonBlockingStream(const Poco::Net::StreamSocket& socket);

// The loaded module's table (front.cpp): loads it on first use, from the first of
// DOCKHAND_TLS_MODULE (a path), the copy the process already has, the directory of the program
// or plugin asking (../lib/dockhand/ or ../), and the install path. Throws TlsError naming every
// place tried and why each failed.
const Api& api();

}  // namespace dockhand::tls::module
