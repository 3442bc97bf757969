// Vision encoders (ViT) of vision-language models: how many prompt tokens an image becomes, and
// what encoding a batch of images costs.
//
// Modelled on Qwen2.5-VL's encoder (Bai et al., "Qwen2.5-VL Technical Report", arXiv 2502.13923,
// section 2.1; the Hugging Face image processor's smart_resize): an image is resized so that both
// sides are multiples of patch x spatial_merge pixels and its area lies in [min_pixels,
// max_pixels]; it is cut into patch x patch pieces (a still image is repeated temporal_patch
// times, which the patch embedding folds back into one temporal slice); `depth` transformer
// blocks run over the patches, most with windowed attention (window_size pixels square) and the
// blocks in full_attention_layers over the whole image; a merger MLP concatenates
// spatial_merge^2 neighbouring patches and projects them to the language model's width. Each
// merged group is one prompt token.
// Ignored: video (temporal patches > 1 frame), the 2-D rotary embedding's cost, padding of
// windows at image borders (windows are counted as full), images batched across requests
// sharing one attention kernel (each image's attention is its own).
// Invariants (validate_vision): every figure positive, window a multiple of patch x merge,
// min_pixels <= max_pixels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace servesim::models {

struct VisionSpec {
  int depth = 0;   // transformer blocks
  int hidden = 0;  // encoder width
  int heads = 0;
  int intermediate = 0;    // SwiGLU MLP width (gate, up, down)
  int patch = 14;          // pixels per patch side
  int spatial_merge = 2;   // patches per token side (2 x 2 patches -> one token)
  int temporal_patch = 2;  // frames per temporal patch (a still image is repeated)
  int in_channels = 3;
  int window = 112;                        // pixels per attention-window side (0: every block attends globally)
  std::vector<int> full_attention_layers;  // blocks with global attention
  int out_hidden = 0;                      // the language model's width the merger projects to
  std::int64_t min_pixels = std::int64_t{56} * 56;  // Qwen2.5-VL preprocessor_config.json
  std::int64_t max_pixels = std::int64_t{28} * 28 * 1280;

  struct Resized {
    std::int64_t width = 0, height = 0;
    std::int64_t patches = 0;  // (height / patch) x (width / patch)
    std::int64_t tokens = 0;   // patches / spatial_merge^2
  };
  // The size the preprocessor resizes a width x height image to, and what that becomes.
  Resized resize(std::int64_t width, std::int64_t height) const;
  std::int64_t image_tokens(std::int64_t width, std::int64_t height) const { return resize(width, height).tokens; }
  // Parameters: patch embedding, blocks, merger (elements).
  std::int64_t params() const;
};

std::vector<std::string> validate_vision(const VisionSpec& v);

}  // namespace servesim::models
