// A request as a RequestSource hands it to the serving model: small, trivially copyable, fixed
// size. Its variable-length parts (block hash ids, image sizes) live in the source's IdRing and
// are read through the source (RequestSource::hash_ids, ::image) until the request is finished.
//
// Prompt composition: prompt_tokens counts every text token the model reads before its first
// output token: the shared prefix (a system prompt, prefix_tokens of them, at the front), then,
// in turn k > 1 of a session, the previous turn's prompt and output (history_tokens, which
// include the prefix), then the new user tokens. Images are extra: `images` of them, in pixels;
// the model's vision encoder turns them into tokens.
// Identity for prefix caching: prefix_id names a shared prompt (equal ids, equal tokens);
// session + turn name a conversation and its turn; hash ids name blocks of block_tokens prompt
// tokens (Mooncake traces: equal ids mean equal block contents and equal everything before them).
#pragma once

#include <cstdint>

#include "core/time.h"

namespace servesim::workloads {

inline constexpr std::uint32_t kNoId32 = 0xffffffffu;
inline constexpr std::uint64_t kNoId64 = ~std::uint64_t{0};

struct ImageSize {
  std::uint32_t width = 0, height = 0;
  friend bool operator==(const ImageSize&, const ImageSize&) = default;
};

struct Request {
  SimTime arrival;
  std::uint32_t prompt_tokens = 0;
  std::uint32_t output_tokens = 0;
  // The arrival stream of this request's follow-ups (its closed-loop client or session), or its
  // open-loop stream; what RequestArrived carried for turn 1.
  std::uint32_t stream = kNoId32;
  std::uint16_t class_id = 0;
  std::uint16_t images = 0;           // image count
  std::uint32_t hash_ids = 0;         // block hash id count
  std::uint32_t prefix_id = kNoId32;  // shared prompt, or none
  std::uint32_t prefix_tokens = 0;
  std::uint32_t turn = 0;            // 1-based turn in its session; 0 = not in a session
  std::uint32_t history_tokens = 0;  // leading prompt tokens = previous turn's prompt + output
  std::uint64_t session = kNoId64;
  std::uint64_t extra = kNoId64;  // IdRing handle of its hash ids, then its packed images
};

}  // namespace servesim::workloads
