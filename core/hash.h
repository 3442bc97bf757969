// FNV-1a, 64 bit (Fowler, Noll and Vo; the offset basis and prime of the 64-bit variant): the
// project's one non-cryptographic hash of bytes, for content fingerprints (profiles, the sweep
// journal's header) and session id text in traces. Stable across compilers and machines, so a
// value written to a file can be compared by a later run. Not for anything an adversary chooses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace servesim {

constexpr std::uint64_t kFnv1aOffsetBasis = 0xcbf29ce484222325ULL;
constexpr std::uint64_t kFnv1aPrime = 0x100000001b3ULL;

// The hash of `bytes`, continuing from `h` (pass the result of a previous call to hash a stream
// in pieces; the default starts a new hash).
constexpr std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h = kFnv1aOffsetBasis) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnv1aPrime;
  }
  return h;
}

// 16 lower-case hex digits.
std::string hex64(std::uint64_t h);

}  // namespace servesim
