#include "dockhand/protocol/result_value.h"

#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace dockhand::protocol {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each byte's 6-bit value in kAlphabet, or -1.
constexpr std::array<std::int8_t, 256> decodeTable() {
  std::array<std::int8_t, 256> table{};
  for (auto& v : table) v = -1;
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::int8_t>(i);
  }
  return table;
}
constexpr std::array<std::int8_t, 256> kDecode = decodeTable();

}  // namespace

bool isUtf8(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t extra = 0;
    std::uint32_t code = 0;
    if ((c & 0xE0U) == 0xC0U) {
      extra = 1;
      code = c & 0x1FU;
    } else if ((c & 0xF0U) == 0xE0U) {
      extra = 2;
      code = c & 0x0FU;
    } else if ((c & 0xF8U) == 0xF0U) {
      extra = 3;
      code = c & 0x07U;
    } else {
      return false;
    }
    if (i + extra >= bytes.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + k]);
      if ((next & 0xC0U) != 0x80U) return false;
      code = (code << 6U) | (next & 0x3FU);
    }
    if ((extra == 1 && code < 0x80) || (extra == 2 && code < 0x800) ||
        (extra == 3 && code < 0x10000) || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  auto byte = [&](std::size_t i) -> std::uint32_t {
    return i < bytes.size() ? static_cast<unsigned char>(bytes[i]) : 0U;
  };
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t n = (byte(i) << 16U) | (byte(i + 1) << 8U) | byte(i + 2);
    const std::size_t left = bytes.size() - i;
    out += kAlphabet[(n >> 18U) & 63U];
    out += kAlphabet[(n >> 12U) & 63U];
    out += left > 1 ? kAlphabet[(n >> 6U) & 63U] : '=';
    out += left > 2 ? kAlphabet[n & 63U] : '=';
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return Error("base64 text of " + std::to_string(text.size()) +
                 " characters (a multiple of 4 was expected)");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    std::uint32_t n = 0;
    std::size_t padding = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++padding;
        n <<= 6U;
        continue;
      }
      const std::int8_t v = kDecode[static_cast<unsigned char>(c)];
      if (v < 0 || padding > 0) {
        return Error("not base64 at offset " + std::to_string(i + k));
      }
      n = (n << 6U) | static_cast<std::uint32_t>(v);
    }
    out += static_cast<char>((n >> 16U) & 0xFFU);
    if (padding < 2) out += static_cast<char>((n >> 8U) & 0xFFU);
    if (padding < 1) out += static_cast<char>(n & 0xFFU);
  }
  return out;
}

void putResultValue(nlohmann::json& result, std::string_view bytes) {
  if (isUtf8(bytes)) {
    result["value"] = std::string(bytes);
  } else {
    result["value_base64"] = base64Encode(bytes);
  }
}

Result<std::string> resultBytes(const nlohmann::json& result) {
  if (!result.is_object()) return Error("the result is not a JSON object");
  for (const char* key : {"stdout", "value"}) {
    if (auto it = result.find(key); it != result.end()) {
      if (!it->is_string())
        return Error(std::string("the result's \"") + key + "\" is not a string");
      return it->get<std::string>();
    }
  }
  if (auto it = result.find("value_base64"); it != result.end()) {
    if (!it->is_string()) return Error("the result's \"value_base64\" is not a string");
    auto bytes = base64Decode(it->get_ref<const std::string&>());
    if (!bytes) return Error("the result's \"value_base64\": " + bytes.error().message);
    return bytes;
  }
  if (result.contains("block")) {
    return Error("the result is still in block " + result["block"].dump() + " (not fetched)");
  }
  return Error(R"(the result carries no value (no "stdout", "value" or "value_base64"))");
}

}  // namespace dockhand::protocol
