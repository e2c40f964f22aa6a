#include "decommission/migrate_answer.h"

#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "blocks/block_fetcher.h"

namespace dockhand::agent {

Result<protocol::BlockInfo> migratedBlock(const protocol::Json& item,
                                          const protocol::BlockInfo& block,
                                          const std::set<std::string>& offered,
                                          const ReadableCheck& readable) {
  auto text = [&](const char* key) {
    auto it = item.find(key);
    return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  protocol::BlockInfo info = block;
  info.executor_id = text("executor_id");
  const std::string url = text("url");
  if (!info.executor_id.empty() && !url.empty()) {
    return Error(fmt::format(
        "answered both executor_id '{}' and url '{}': a block lives in one place (a peer, or a "
        "store at a URL)",
        info.executor_id, url));
  }
  if (!info.executor_id.empty()) {
    if (offered.count(info.executor_id) == 0) {
      return Error(fmt::format(
          "answered executor_id '{}', which is not a peer it was offered: readers would be sent "
          "to an agent that does not hold it",
          info.executor_id));
    }
    info.url = text("location");
  } else if (!url.empty()) {
    if (!protocol::isExternalStoreUrl(url)) {
      return Error(fmt::format(
          "answered url '{}', which is no http:// or https:// URL a reader could GET", url));
    }
    info.url = url;
  } else {
    info.url = "fallback:" + info.id;
  }
  if (readable) {
    auto can = readable(info);
    if (!can) {
      const std::string place = !info.executor_id.empty() ? "peer " + info.executor_id
                                : !url.empty()            ? "url " + url
                                                          : std::string("the fallback store");
      return Error(
          fmt::format("answered {}, where readers cannot get it: {}", place, can.error().message));
    }
  }
  return info;
}

ReadableCheck readersCanGet(std::filesystem::path fallback_dir, std::chrono::milliseconds timeout,
                            protocol::auth::RequestSigner signer, Poco::Net::Context::Ptr tls) {
  return [fallback_dir = std::move(fallback_dir), timeout, signer = std::move(signer),
          tls = std::move(tls)](const protocol::BlockInfo& info) -> Result<void> {
    if (!info.executor_id.empty()) return {};
    if (protocol::isExternalStoreUrl(info.url)) {
      return probeBlock(
          protocol::InputBlock{
              .id = info.id, .url = info.url, .size = info.size, .checksum = info.checksum},
          timeout, signer, tls);
    }
    // The store may be a plugin's own directory (its config's), served by the agents whose
    // fallback_dir it is: this agent cannot see it, the readers' fetch failures would.
    if (fallback_dir.empty()) return {};
    const std::filesystem::path file = fallback_dir / info.id;
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (ec) return Error(fmt::format("{} is not there ({})", file.string(), ec.message()));
    if (size != info.size) {
      return Error(fmt::format("{} has {} bytes, expected {}", file.string(), size, info.size));
    }
    return {};
  };
}

}  // namespace dockhand::agent
