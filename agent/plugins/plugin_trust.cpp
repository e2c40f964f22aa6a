#include "plugins/plugin_trust.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>
#include <Poco/SHA2Engine.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dockhand/tls/tls.h"
#include "plugins/plugin_library.h"

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;

// A file the policy reads, when it may: it exists and passes the owner-and-mode check.
Result<std::string> readTrustFile(const PluginTrust& trust, const fs::path& path) {
  if (!trust.allow_insecure) {
    if (auto secure = checkFileSecurity(path); !secure) return secure.error();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool isHex64(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

// Whether a catalog's text pins `hash`.
bool pins(const std::string& catalog, const std::string& hash) {
  std::istringstream lines(catalog);
  std::string line;
  while (std::getline(lines, line)) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    std::string word = line.substr(start, line.find_first_of(" \t", start) - start);
    std::transform(word.begin(), word.end(), word.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (isHex64(word) && word == hash) return true;
  }
  return false;
}

std::string decodeBase64(const std::string& text) {
  std::istringstream in(text);
  Poco::Base64Decoder decoder(in);
  std::string out;
  char c = 0;
  while (decoder.get(c)) out.push_back(c);
  return out;
}

}  // namespace

std::string sha256Hex(std::string_view bytes) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(bytes.data(), static_cast<unsigned>(bytes.size()));
  return Poco::DigestEngine::digestToHex(engine.digest());
}

fs::path signatureFile(const fs::path& plugin) { return fs::path(plugin.string() + ".sig"); }

std::string signatureFileText(std::string_view signature) {
  std::ostringstream encoded;
  Poco::Base64Encoder encoder(encoded);
  encoder.rdbuf()->setLineLength(0);
  encoder.write(signature.data(), static_cast<std::streamsize>(signature.size()));
  encoder.close();
  return encoded.str() + "\n";
}

Result<std::string> checkTrust(const PluginTrust& trust, const fs::path& path,
                               std::string_view bytes) {
  if (trust.policy == PluginTrust::Policy::kAny) return std::string("any");
  const std::string hash = sha256Hex(bytes);
  std::vector<std::string> notes;  // what could not be used, for the refusal
  std::vector<std::string> catalogs;
  std::error_code ec;
  for (const auto& catalog : trust.catalogs) {
    catalogs.push_back(catalog.string());
    if (!fs::exists(catalog, ec)) continue;
    auto text = readTrustFile(trust, catalog);
    if (!text) {
      notes.push_back("catalog " + text.error().message);
    } else if (pins(*text, hash)) {
      return "catalog " + catalog.string();
    }
  }
  const fs::path sig_file = signatureFile(path);
  std::string signed_by;
  if (fs::exists(sig_file, ec)) {
    std::ifstream in(sig_file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string signature = decodeBase64(text);
    std::vector<fs::path> keys;
    if (!trust.keys_dir.empty() && fs::is_directory(trust.keys_dir, ec)) {
      for (const auto& entry : fs::directory_iterator(trust.keys_dir, ec)) {
        if (entry.path().extension() == ".pub") keys.push_back(entry.path());
      }
    }
    std::sort(keys.begin(), keys.end());
    if (signature.size() != 64) {
      notes.push_back(sig_file.string() + " is not a base64 Ed25519 signature (64 bytes)");
    }
    for (const auto& key : keys) {
      if (signature.size() != 64) break;
      auto pem = readTrustFile(trust, key);
      if (!pem) {
        notes.push_back("key " + pem.error().message);
        continue;
      }
      try {
        if (tls::verifyEd25519(*pem, bytes, signature)) {
          return fmt::format("signature {} by {}", sig_file.string(), key.string());
        }
      } catch (const tls::TlsError& e) {
        notes.push_back(fmt::format("key {}: {}", key.string(), e.what()));
      }
    }
    signed_by = keys.empty() ? fmt::format("{} is there but {} holds no trusted key (*.pub)",
                                           sig_file.filename().string(), trust.keys_dir.string())
                             : fmt::format("{} verifies under none of the {} key(s) in {}",
                                           sig_file.filename().string(), keys.size(),
                                           trust.keys_dir.string());
  } else {
    signed_by = "it has no signature (" + sig_file.filename().string() + ")";
  }
  return Error(fmt::format(
      "refused by plugin_trust (policy verified): its SHA-256 {} is in no catalog ({}) and {}{}; "
      "to trust it, run `dockhand plugins trust {}` (pins this build) or sign it with "
      "`dockhand plugins sign --key KEY {}` and put KEY's public half in {}",
      hash,
      catalogs.empty() ? std::string("none set") : fmt::format("{}", fmt::join(catalogs, ", ")),
      signed_by, notes.empty() ? std::string() : fmt::format(" ({})", fmt::join(notes, "; ")),
      path.string(), path.string(), trust.keys_dir.string()));
}

}  // namespace dockhand::agent
