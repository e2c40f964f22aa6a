// dockhand/checksum.hpp: the checksum every block carries, "xxh64:<16 lower-case hex digits>"
// (xxHash64 with seed 0 over the block's bytes). A migration plugin that copies a block
// somewhere can check its copy against the `checksum` of the migrate request; a job library or
// a tool that writes blocks can compute what the agent will.
//
//   dockhand::sdk::Xxh64 sum;
//   while (... read a piece ...) sum.update(piece.data(), piece.size());
//   if (sum.text() != request_checksum) ... the copy is not the block ...
//
//   dockhand::sdk::checksumOf(bytes)              // "xxh64:..." of bytes in memory
//   dockhand::sdk::parseChecksum("xxh64:...")     // true and the value, or false
//
// Header-only, C++17, no dependency (the hash is written out here from the xxHash64
// specification; it gives the same values as the xxhash library the agent uses, on any
// byte order). An Xxh64 is a plain value: one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace dockhand::sdk {

class Xxh64 {
 public:
  explicit Xxh64(std::uint64_t seed = 0) { reset(seed); }

  void reset(std::uint64_t seed = 0) {
    seed_ = seed;
    lanes_[0] = seed + kPrime1 + kPrime2;
    lanes_[1] = seed + kPrime2;
    lanes_[2] = seed;
    lanes_[3] = seed - kPrime1;
    total_ = 0;
    buffered_ = 0;
  }

  void update(const void* data, std::size_t size) {
    const auto* in = static_cast<const unsigned char*>(data);
    total_ += size;
    if (buffered_ + size < kStripe) {
      if (size > 0) std::memcpy(buffer_ + buffered_, in, size);
      buffered_ += size;
      return;
    }
    if (buffered_ > 0) {
      const std::size_t fill = kStripe - buffered_;
      std::memcpy(buffer_ + buffered_, in, fill);
      stripe(buffer_);
      in += fill;
      size -= fill;
      buffered_ = 0;
    }
    for (; size >= kStripe; in += kStripe, size -= kStripe) stripe(in);
    if (size > 0) std::memcpy(buffer_, in, size);
    buffered_ = size;
  }

  std::uint64_t value() const {
    std::uint64_t acc = 0;
    if (total_ >= kStripe) {
      acc = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18);
      for (const std::uint64_t lane : lanes_) {
        acc ^= round(0, lane);
        acc = acc * kPrime1 + kPrime4;
      }
    } else {
      acc = seed_ + kPrime5;
    }
    acc += total_;
    const unsigned char* at = buffer_;
    std::size_t left = buffered_;
    for (; left >= 8; at += 8, left -= 8) {
      acc ^= round(0, read64(at));
      acc = rotl(acc, 27) * kPrime1 + kPrime4;
    }
    if (left >= 4) {
      acc ^= read32(at) * kPrime1;
      acc = rotl(acc, 23) * kPrime2 + kPrime3;
      at += 4;
      left -= 4;
    }
    for (; left > 0; ++at, --left) {
      acc ^= *at * kPrime5;
      acc = rotl(acc, 11) * kPrime1;
    }
    acc ^= acc >> 33U;
    acc *= kPrime2;
    acc ^= acc >> 29U;
    acc *= kPrime3;
    acc ^= acc >> 32U;
    return acc;
  }

  // "xxh64:<16 hex>" of what was hashed so far.
  std::string text() const;

 private:
  static constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
  static constexpr std::uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
  static constexpr std::uint64_t kPrime3 = 0x165667B19E3779F9ULL;
  static constexpr std::uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
  static constexpr std::uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;
  static constexpr std::size_t kStripe = 32;

  static std::uint64_t rotl(std::uint64_t x, unsigned bits) {
    return (x << bits) | (x >> (64U - bits));
  }
  static std::uint64_t round(std::uint64_t acc, std::uint64_t lane) {
    acc += lane * kPrime2;
    return rotl(acc, 31) * kPrime1;
  }
  // Little-endian reads, whatever the host's order.
  static std::uint64_t read64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8U) | p[i];
    return v;
  }
  static std::uint64_t read32(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8U) | p[i];
    return v;
  }
  void stripe(const unsigned char* p) {
    for (std::size_t i = 0; i < 4; ++i) lanes_[i] = round(lanes_[i], read64(p + 8 * i));
  }

  std::uint64_t seed_ = 0;
  std::uint64_t lanes_[4] = {};
  std::uint64_t total_ = 0;
  unsigned char buffer_[kStripe] = {};
  std::size_t buffered_ = 0;
};

inline constexpr std::string_view kChecksumPrefix = "xxh64:";

// "xxh64:" and the 16 lower-case hex digits of `value`.
inline std::string formatChecksum(std::uint64_t value) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string out(kChecksumPrefix);
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kHex[(value >> shift) & 0xFU]);
  return out;
}

// True and `value` set when `text` is "xxh64:" and 16 hex digits (either case); false else.
inline bool parseChecksum(std::string_view text, std::uint64_t& value) {
  if (text.size() != kChecksumPrefix.size() + 16 ||
      text.substr(0, kChecksumPrefix.size()) != kChecksumPrefix) {
    return false;
  }
  std::uint64_t v = 0;
  for (const char c : text.substr(kChecksumPrefix.size())) {
    unsigned digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return false;
    }
    v = (v << 4U) | digit;
  }
  value = v;
  return true;
}

inline std::string Xxh64::text() const { return formatChecksum(value()); }

// The checksum of `bytes`, as a block of those bytes carries it.
inline std::string checksumOf(std::string_view bytes) {
  Xxh64 sum;
  sum.update(bytes.data(), bytes.size());
  return sum.text();
}

}  // namespace dockhand::sdk
