#include "models/vision.h"

#include <algorithm>
#include <cmath>

namespace servesim::models {

VisionSpec::Resized VisionSpec::resize(std::int64_t width, std::int64_t height) const {
  // Qwen2-VL's smart_resize (transformers image_processing_qwen2_vl.py): round each side to the
  // nearest multiple of factor = patch x merge; if the area exceeds max_pixels scale both sides
  // down by sqrt(area / max) and floor to the factor, if below min_pixels scale up and ceil.
  const double factor = static_cast<double>(patch) * spatial_merge;
  const double w = static_cast<double>(std::max<std::int64_t>(width, 1));
  const double h = static_cast<double>(std::max<std::int64_t>(height, 1));
  double hb = std::max(factor, std::round(h / factor) * factor);
  double wb = std::max(factor, std::round(w / factor) * factor);
  if (hb * wb > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    hb = std::max(factor, std::floor(h / beta / factor) * factor);
    wb = std::max(factor, std::floor(w / beta / factor) * factor);
  } else if (hb * wb < static_cast<double>(min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    hb = std::ceil(h * beta / factor) * factor;
    wb = std::ceil(w * beta / factor) * factor;
  }
  Resized r;
  r.width = static_cast<std::int64_t>(wb);
  r.height = static_cast<std::int64_t>(hb);
  r.patches = (r.height / patch) * (r.width / patch);
  r.tokens = r.patches / (std::int64_t{spatial_merge} * spatial_merge);
  return r;
}

std::int64_t VisionSpec::params() const {
  const std::int64_t h = hidden, f = intermediate;
  // Patch embedding: a Conv3d without bias over temporal x patch x patch x channels.
  const std::int64_t embed = std::int64_t{in_channels} * temporal_patch * patch * patch * h;
  // Per block: fused QKV with bias, output projection with bias, SwiGLU MLP with biases, two
  // RMSNorms (Qwen2.5-VL vision blocks).
  const std::int64_t block = (h * 3 * h + 3 * h) + (h * h + h) + (3 * h * f + 2 * f + h) + 2 * h;
  // Merger: RMSNorm over h, then Linear(m h -> m h) + GELU + Linear(m h -> out) with biases,
  // m = merge^2.
  const std::int64_t m = std::int64_t{spatial_merge} * spatial_merge * h;
  const std::int64_t merger = h + (m * m + m) + (m * out_hidden + out_hidden);
  return embed + depth * block + merger;
}

std::vector<std::string> validate_vision(const VisionSpec& v) {
  std::vector<std::string> out;
  if (v.depth < 1 || v.hidden < 1 || v.heads < 1 || v.intermediate < 1 || v.patch < 1 || v.spatial_merge < 1 ||
      v.temporal_patch < 1 || v.out_hidden < 1 || v.in_channels < 1) {
    out.emplace_back("every vision encoder figure must be positive");
    return out;
  }
  if (v.hidden % v.heads != 0) {
    out.push_back("vision heads (" + std::to_string(v.heads) + ") must divide the vision width (" +
                  std::to_string(v.hidden) + ")");
  }
  const int unit = v.patch * v.spatial_merge;
  if (v.window < 0 || (v.window > 0 && v.window % unit != 0)) {
    out.push_back("the vision attention window (" + std::to_string(v.window) +
                  " px) must be a multiple of patch x spatial_merge (" + std::to_string(unit) + " px)");
  }
  if (v.min_pixels > v.max_pixels) out.emplace_back("vision min_pixels exceeds max_pixels");
  for (int l : v.full_attention_layers) {
    if (l < 0 || l >= v.depth) {
      out.push_back("vision full-attention layer " + std::to_string(l) + " is outside 0.." +
                    std::to_string(v.depth - 1));
    }
  }
  return out;
}

}  // namespace servesim::models
