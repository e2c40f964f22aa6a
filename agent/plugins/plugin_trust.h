// Which plugin files the agent trusts to load: the operator's `plugin_trust` policy
// (docs/plugins.md, "Trust"). Under "verified" a file is loaded only when its bytes' SHA-256 is
// pinned in a catalog or a detached signature (<file>.sig) by a trusted key verifies over
// them; under "any" (the default) every file that passes the owner-and-mode check loads.
//
//   catalog     lines "<sha256 hex>  <anything>", as `sha256sum` prints them ('#' starts a
//               comment); the package ships one of its own plugins, the operator keeps another
//               (`dockhand plugins trust FILE` adds a line to it).
//   signature   <file>.sig: the base64 text of the raw Ed25519 signature of the file's bytes
//               (`dockhand plugins sign --key KEY FILE` writes it).
//   keys        every *.pub in keys_dir: a PEM Ed25519 public key.
//
// The bytes checked are those the caller read from the one descriptor it then loads
// (PluginLibrary::open), never the path again. Catalogs, keys and their directories pass the
// same owner-and-mode check as the plugins (unless allow_insecure_plugins): a file others may
// write could trust anything. Pure functions of the files read; no state.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dockhand/base/result.h"

namespace dockhand::metrics {
class Registry;
}  // namespace dockhand::metrics

namespace dockhand::agent {

struct PluginTrust {
  enum class Policy { kAny, kVerified };
  Policy policy = Policy::kAny;
  std::vector<std::filesystem::path> catalogs;  // read in order; one that does not exist is skipped
  std::filesystem::path keys_dir;               // empty or missing: no trusted key
  bool allow_insecure = false;                  // catalogs and keys skip the owner-and-mode check
  // Where refusals are counted (dockhand_plugin_refusals_total{policy}): the agent's registry;
  // null: not counted (the command-line tools).
  std::shared_ptr<metrics::Registry> metrics{};
};

inline std::string_view toString(PluginTrust::Policy policy) {
  return policy == PluginTrust::Policy::kVerified ? "verified" : "any";
}

// The lower-case hex SHA-256 of `bytes`.
std::string sha256Hex(std::string_view bytes);

// Whether `trust` lets the plugin file `path`, whose bytes are `bytes`, load: how it was trusted
// ("any", "catalog FILE", "signature FILE.sig by KEY"), or why not, with the mend.
Result<std::string> checkTrust(const PluginTrust& trust, const std::filesystem::path& path,
                               std::string_view bytes);

// The signature file of a plugin file: <file>.sig.
std::filesystem::path signatureFile(const std::filesystem::path& plugin);
// What a signature file holds for a raw Ed25519 `signature`: its base64 text and a newline
// (the format checkTrust reads).
std::string signatureFileText(std::string_view signature);

}  // namespace dockhand::agent
