// Published checkpoints as the simulator's model presets and weight formats: what a measured
// benchmark's `model_path` ("nvidia/DeepSeek-R1-NVFP4", "Qwen/Qwen3-235B-A22B-FP8") was served as.
//
// A checkpoint is an architecture (a models:: preset) stored in formats: which layers are
// quantised, and how, is a property of the checkpoint (its config.json quantization_config or
// ModelOpt's hf_quant_config.json exclude list), not of the benchmark. Every entry of the table
// (checkpoints.cpp) names the file it was read from.
//
// Lookup (checkpoint()): the id, case-insensitive, as "org/name" in the table; else the name
// without its organisation (mirrors and re-uploads keep the name: "zhipuai/GLM-5"); else the
// name with known variant suffixes taken off one at a time from the end ("-Instruct", "-FP8",
// "-NVFP4", "-FP4", "-BF16", "-2507", "-0528", "-0905", "-Thinking", "-Base", "-Exp", "-hf")
// until it names a preset or an entry: the formats are then the entry's, or read from the
// suffixes taken off (FP8: block-scaled fp8, the format of the FP8 checkpoints the families
// publish; NVFP4 / FP4: ModelOpt NVFP4 as the table's entries of that preset have it), and the
// match says it was derived. An unknown name gives nothing.
// Ignored: checkpoints of architectures without a preset, LoRA adapters, revisions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/formats.h"

namespace servesim::studies {

struct CheckpointFormats {
  models::Format weights = models::Format::kBf16;   // attention, dense MLPs, shared experts
  models::Format experts = models::Format::kBf16;   // routed experts
  models::Format kv_cache = models::Format::kBf16;  // what the checkpoint asks the engine for
  models::Format mlp = models::Format::kBf16;       // dense MLPs: `weights` unless mixed precision
};

struct Checkpoint {
  std::string id;      // as in the table ("nvidia/DeepSeek-R1-NVFP4")
  std::string preset;  // models:: preset name
  CheckpointFormats formats;
  // AIConfigurator quant modes (gemm_quant_mode / moe_quant_mode, as the measured benchmarks
  // record them) that mean this checkpoint's own formats, e.g. "fp8" and "fp8_block" for
  // DeepSeek-R1's block-scaled fp8 weights, "nvfp4" for a ModelOpt NVFP4 checkpoint.
  std::vector<std::string> native_modes;
  // The benchmarks of this checkpoint ran its own formats whatever quant mode they record
  // (gpt-oss ships one MXFP4 checkpoint).
  bool pinned = false;
  std::string source;
  // How the id was matched: empty when the table holds it; else the rule that derived it.
  std::string derived;
};

// The checkpoint a model path names, or nullopt.
std::optional<Checkpoint> checkpoint(std::string_view model_path);

// The table's checkpoints of `preset` whose native modes include `mode` (the checkpoint that
// published the format a benchmark of another checkpoint of the same model records).
std::optional<Checkpoint> checkpoint_of_preset(std::string_view preset, std::string_view mode);

// Every entry of the table (tests, documentation).
const std::vector<Checkpoint>& checkpoint_table();

}  // namespace servesim::studies
