#include "support/http_client.h"

#include <Poco/Exception.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/URI.h>

namespace dockhand::testing {

HttpReply httpRequest(const std::string& method, const std::string& url,
                      const std::map<std::string, std::string>& headers) {
  HttpReply reply;
  try {
    Poco::URI uri(url);
    Poco::Net::HTTPClientSession session(uri.getHost(), uri.getPort());
    session.setTimeout(Poco::Timespan(10, 0));
    Poco::Net::HTTPRequest request(method, uri.getPathEtc(), Poco::Net::HTTPMessage::HTTP_1_1);
    for (const auto& [name, value] : headers) request.set(name, value);
    session.sendRequest(request);
    Poco::Net::HTTPResponse response;
    std::istream& in = session.receiveResponse(response);
    reply.status = static_cast<int>(response.getStatus());
    reply.checksum = response.get("X-Dockhand-Checksum", "");
    for (const auto& [name, value] : response) reply.headers[name] = value;
    if (method != Poco::Net::HTTPRequest::HTTP_HEAD)
      Poco::StreamCopier::copyToString(in, reply.body);
  } catch (const Poco::Exception&) {
    reply.status = 0;
  }
  return reply;
}

}  // namespace dockhand::testing
