// Strong ids: a 32-bit index into a vector, tagged by what it indexes, so a RequestId cannot be
// passed where an InstanceId is expected. State lives in vectors indexed by these ids.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace servesim {

template <class Tag>
struct Id {
  static constexpr std::uint32_t kInvalid = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t value = kInvalid;

  constexpr Id() = default;
  constexpr explicit Id(std::uint32_t v) : value(v) {}
  constexpr bool valid() const { return value != kInvalid; }
  constexpr std::size_t index() const { return value; }
  constexpr auto operator<=>(const Id&) const = default;  // NOLINT(modernize-use-nullptr)
};

using RequestId = Id<struct RequestTag>;
using InstanceId = Id<struct InstanceTag>;
using PoolId = Id<struct PoolTag>;

}  // namespace servesim
