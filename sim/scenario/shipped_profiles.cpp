#include "sim/scenario/shipped_profiles.h"

#include <map>
#include <mutex>
#include <stdexcept>

#include <zlib.h>

#include "models/chip_spec.h"

namespace servesim::scenario {
namespace {

// The gzip stream's bytes inflated (zlib; 16 + MAX_WBITS reads the gzip header). The streams are
// the build's own, so a failure is a bug, not bad input.
std::string inflate_gzip(const unsigned char* begin, const unsigned char* end) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("zlib: inflateInit2 failed");
  z.next_in = const_cast<unsigned char*>(begin);
  z.avail_in = static_cast<uInt>(end - begin);
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<unsigned char*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: a shipped profile does not inflate");
  return out;
}

}  // namespace

std::optional<std::string> shipped_profile_text(std::string_view name) {
  // Inflated once per process (validate and sweeps load hundreds of scenarios naming one).
  static std::mutex mutex;
  static std::map<std::string, std::string, std::less<>> inflated;
  for (const ShippedProfile& p : shipped_profiles()) {
    if (p.name != name) continue;
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = inflated.find(name);
    if (it == inflated.end()) it = inflated.emplace(std::string(name), inflate_gzip(p.gz_begin, p.gz_end)).first;
    return it->second;
  }
  return std::nullopt;
}

std::optional<std::string> shipped_profile_compact(std::string_view name) {
  for (const ShippedProfile& p : shipped_profiles()) {
    if (p.name == name) return inflate_gzip(p.compact_gz_begin, p.compact_gz_end);
  }
  return std::nullopt;
}

std::vector<std::string> shipped_profile_names() {
  std::vector<std::string> out;
  for (const ShippedProfile& p : shipped_profiles()) out.emplace_back(p.name);
  return out;
}

namespace {

// default_profile among the profiles measured on `chip` itself.
std::optional<std::string> own_profile(std::string_view chip, std::string_view engine) {
  const ShippedProfile* any_engine = nullptr;
  const ShippedProfile* default_engine = nullptr;
  const ShippedProfile* other_engine = nullptr;
  for (const ShippedProfile& p : shipped_profiles()) {
    if (p.chip != chip) continue;
    const std::string_view e = p.engine;
    if (e == engine) return std::string(p.name);
    if (e.empty() && !any_engine) any_engine = &p;
    if (e == kDefaultEngine && !default_engine) default_engine = &p;
    if (!other_engine) other_engine = &p;
  }
  // Another engine's kernels measured on this chip are nearer than the preset's assumed figures.
  for (const ShippedProfile* p : {any_engine, default_engine, other_engine}) {
    if (p) return std::string(p->name);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> default_profile(std::string_view chip, std::string_view engine) {
  if (auto own = own_profile(chip, engine)) return own;
  // A chip that is another's die with other links (models::ChipSpec::kernels_of) runs its kernels.
  const auto spec = models::chip_preset(chip);
  if (spec && !spec->kernels_of.empty()) return own_profile(spec->kernels_of, engine);
  return std::nullopt;
}

}  // namespace servesim::scenario
