#include "studies/checkpoints.h"

#include <algorithm>
#include <cctype>

#include "models/model_spec.h"

namespace servesim::studies {
namespace {

using models::Format;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct Row {
  const char* id;
  const char* preset;
  Format weights, experts, kv;
  const char* native;  // comma-separated quant modes
  bool pinned;
  const char* source;
};

constexpr Format kBf16 = Format::kBf16, kFp8 = Format::kFp8, kBlock = Format::kFp8Block;
constexpr Format kNvfp4 = Format::kNvfp4, kMxfp4 = Format::kMxfp4, kW4A16 = Format::kW4A16;

// Sources: each checkpoint's Hugging Face config.json (quantization_config) or, for NVIDIA's
// ModelOpt checkpoints, hf_quant_config.json (quant_algo, kv_cache_quant_algo, exclude_modules);
// copies of both sit in ai-dynamo/aiconfigurator at 095f58a5, aic-core/src/aiconfigurator_core/
// model_configs/. ModelOpt NVFP4 checkpoints of MoE models exclude self_attn, the dense layers and
// the shared experts (bf16) and quantise the routed experts (NVFP4, one e4m3 scale per 16) with an
// fp8 KV cache; of dense models they quantise every linear layer but lm_head. The families' own
// FP8 checkpoints are block-scaled (weight_block_size [128, 128]); NVIDIA's FP8 ones per-tensor.
// Checkpoints whose dense MLPs are in a format of their own (ModelFormats::mlp), by id: the MLP
// part of their rows' sources. W4A16_NVFP4 (fp4 weights with an e4m3 scale per 16, bf16
// activations) is the simulator's W4A16: 0.5625 bytes per weight, the bf16 rate.
struct MlpFormat {
  const char* id;
  Format mlp;
};
const MlpFormat kMlpFormats[] = {
    {"nvidia/Gemma-4-31B-IT-NVFP4", kNvfp4},
    {"nvidia/Qwen3.6-27B-NVFP4", kW4A16},
};

const Row kRows[] = {
    {"meta-llama/Llama-3.1-8B", "llama-3.1-8b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Llama-3.1-8B config.json (bf16)"},
    {"meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Llama-3.1-8B-Instruct config.json (bf16)"},
    {"nvidia/Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b", kFp8, kFp8, kFp8, "fp8,fp8_static", false,
     "nvidia/Llama-3.1-8B-Instruct-FP8 hf_quant_config.json (FP8 per-tensor, FP8 KV, lm_head excluded)"},
    {"meta-llama/Llama-3.1-70B", "llama-3.1-70b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Llama-3.1-70B config.json (bf16)"},
    {"meta-llama/Meta-Llama-3.1-70B", "llama-3.1-70b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Meta-Llama-3.1-70B config.json (bf16)"},
    {"meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Llama-3.1-70B-Instruct config.json (bf16)"},
    {"meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Llama-3.3-70B-Instruct config.json: the Llama-3.1-70B architecture (bf16)"},
    {"nvidia/Llama-3.1-70B-Instruct-FP8", "llama-3.1-70b", kFp8, kFp8, kFp8, "fp8,fp8_static", false,
     "nvidia/Llama-3.1-70B-Instruct-FP8 hf_quant_config.json (FP8 per-tensor, FP8 KV, lm_head excluded)"},
    {"nvidia/Llama-3.3-70B-Instruct-FP8", "llama-3.1-70b", kFp8, kFp8, kFp8, "fp8,fp8_static", false,
     "nvidia/Llama-3.3-70B-Instruct-FP8 hf_quant_config.json (FP8 per-tensor, FP8 KV)"},
    {"nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3.1-70b", kNvfp4, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Llama-3.3-70B-Instruct-FP4 hf_quant_config.json (NVFP4 linear layers, FP8 KV)"},
    {"meta-llama/Meta-Llama-3.1-8B", "llama-3.1-8b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Meta-Llama-3.1-8B config.json (bf16)"},
    {"meta-llama/Meta-Llama-3.1-405B", "llama-3.1-405b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Meta-Llama-3.1-405B config.json (bf16)"},
    {"meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Llama-4-Scout-17B-16E-Instruct config.json (bf16); text prompts run the language model"},
    {"meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Llama-4-Maverick-17B-128E-Instruct config.json (bf16); text prompts run the language model"},
    {"mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b", kBf16, kBf16, kBf16, "bfloat16", false,
     "mistralai/Mixtral-8x7B-v0.1 config.json (bf16)"},
    {"mistralai/Mixtral-8x22B-v0.1", "mixtral-8x22b", kBf16, kBf16, kBf16, "bfloat16", false,
     "mistralai/Mixtral-8x22B-v0.1 config.json (bf16)"},
    {"meta-llama/Llama-2-70b-hf", "llama-2-70b", kBf16, kBf16, kBf16, "bfloat16", false,
     "meta-llama/Llama-2-70b-hf config.json (fp16)"},
    {"Qwen/Qwen3-32B", "qwen3-32b", kBf16, kBf16, kBf16, "bfloat16", false, "Qwen/Qwen3-32B config.json (bf16)"},
    {"Qwen/Qwen3-32B-FP8", "qwen3-32b", kBlock, kBlock, kBf16, "fp8_block", false,
     "Qwen/Qwen3-32B-FP8 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"nvidia/Qwen3-32B-NVFP4", "qwen3-32b", kNvfp4, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Qwen3-32B-NVFP4 hf_quant_config.json (NVFP4 linear layers, FP8 KV, lm_head excluded)"},
    {"Qwen/Qwen3-32B-FP8-Static-PerTensor", "qwen3-32b", kFp8, kFp8, kFp8, "fp8,fp8_static", false,
     "Qwen/Qwen3-32B-FP8-Static-PerTensor hf_quant_config.json (ModelOpt FP8 per-tensor, FP8 KV, "
     "lm_head excluded)"},
    {"Qwen/Qwen3-0.6B", "qwen3-0.6b", kBf16, kBf16, kBf16, "bfloat16", false, "Qwen/Qwen3-0.6B config.json (bf16)"},
    {"Qwen/Qwen3-1.7B", "qwen3-1.7b", kBf16, kBf16, kBf16, "bfloat16", false, "Qwen/Qwen3-1.7B config.json (bf16)"},
    {"Qwen/Qwen3-4B", "qwen3-4b", kBf16, kBf16, kBf16, "bfloat16", false, "Qwen/Qwen3-4B config.json (bf16)"},
    {"Qwen/Qwen3-8B", "qwen3-8b", kBf16, kBf16, kBf16, "bfloat16", false, "Qwen/Qwen3-8B config.json (bf16)"},
    {"Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-30B-A3B config.json (bf16)"},
    {"Qwen/Qwen3-30B-A3B-FP8", "qwen3-30b-a3b", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "Qwen/Qwen3-30B-A3B-FP8 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3-coder-480b-a35b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-Coder-480B-A35B-Instruct config.json (bf16)"},
    {"Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-235B-A22B config.json (bf16)"},
    {"Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-235B-A22B-Instruct-2507 config.json: the Qwen3-235B-A22B architecture (bf16)"},
    {"Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "Qwen/Qwen3-235B-A22B-FP8 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"nvidia/Qwen3-235B-A22B-NVFP4", "qwen3-235b-a22b", kNvfp4, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Qwen3-235B-A22B-NVFP4 hf_quant_config.json: exclude lm_head and the router only, so "
     "attention NVFP4 too"},
    // Qwen3-VL: each config.json's text_config is a Qwen3 language model's, layer for layer
    // (ai-dynamo/aiconfigurator model_configs at 095f58a5). The benchmarks these rows come from
    // send text prompts, so the language model is what runs; the vision tower (vision_config:
    // 24-27 blocks of 1,024-1,152, about 0.3-0.4 B parameters) is neither run nor held in memory,
    // and the deepstack merges (visual features added at three early layers) touch image tokens
    // only.
    {"Qwen/Qwen3-VL-235B-A22B-Instruct", "qwen3-235b-a22b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-VL-235B-A22B-Instruct config.json: text_config is Qwen3-235B-A22B's; text prompts run the "
     "language model, the vision tower is neither run nor held"},
    {"Qwen/Qwen3-VL-30B-A3B-Instruct", "qwen3-30b-a3b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-VL-30B-A3B-Instruct config.json: text_config is Qwen3-30B-A3B's; text prompts run the language "
     "model, the vision tower is neither run nor held"},
    {"Qwen/Qwen3-VL-32B-Instruct", "qwen3-32b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-VL-32B-Instruct config.json: text_config is Qwen3-32B's; text prompts run the language model, "
     "the vision tower is neither run nor held"},
    {"Qwen/Qwen3-VL-32B-Thinking", "qwen3-32b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-VL-32B-Thinking config.json: text_config is Qwen3-32B's; text prompts run the language model, "
     "the vision tower is neither run nor held"},
    {"Qwen/Qwen3-VL-4B-Instruct", "qwen3-4b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-VL-4B-Instruct config.json: text_config is Qwen3-4B's (tied embeddings); text prompts run the "
     "language model, the vision tower is neither run nor held"},
    {"Qwen/Qwen3-VL-8B-Instruct", "qwen3-8b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-VL-8B-Instruct config.json: text_config is Qwen3-8B's; text prompts run the language model, "
     "the vision tower is neither run nor held"},
    {"Qwen/Qwen3-VL-2B-Instruct", "qwen3-1.7b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3-VL-2B-Instruct config.json: text_config is Qwen3-1.7B's (tied embeddings); text prompts run the "
     "language model, the vision tower is neither run nor held"},
    {"deepseek-ai/DeepSeek-V3", "deepseek-v3", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "deepseek-ai/DeepSeek-V3 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"deepseek-ai/DeepSeek-V3-0324", "deepseek-v3", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "deepseek-ai/DeepSeek-V3-0324 config.json (the DeepSeek-V3 architecture, block fp8)"},
    {"deepseek-ai/DeepSeek-V3.1", "deepseek-v3", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "deepseek-ai/DeepSeek-V3.1 config.json (the DeepSeek-V3 architecture, block fp8)"},
    {"nvidia/DeepSeek-V3.1-NVFP4", "deepseek-v3", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/DeepSeek-V3.1-NVFP4 hf_quant_config.json (routed experts NVFP4; attention, dense layers "
     "and shared experts excluded; FP8 KV)"},
    {"deepseek-ai/DeepSeek-R1", "deepseek-r1", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "deepseek-ai/DeepSeek-R1 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"deepseek-ai/DeepSeek-R1-0528", "deepseek-r1", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "deepseek-ai/DeepSeek-R1-0528 config.json (the DeepSeek-V3 architecture, block fp8)"},
    {"nvidia/DeepSeek-R1-NVFP4", "deepseek-r1", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/DeepSeek-R1-NVFP4 hf_quant_config.json (ModelOpt NVFP4 of the routed experts, FP8 KV; as "
     "nvidia/DeepSeek-V3.1-NVFP4)"},
    {"nvidia/DeepSeek-R1-FP4", "deepseek-r1", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/DeepSeek-R1-FP4 hf_quant_config.json (ModelOpt NVFP4 of the routed experts, FP8 KV)"},
    {"nvidia/DeepSeek-R1-0528-FP4", "deepseek-r1", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/DeepSeek-R1-0528-FP4 hf_quant_config.json (ModelOpt NVFP4 of the routed experts, FP8 KV)"},
    {"deepseek-ai/DeepSeek-V3.2", "deepseek-v3.2", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "deepseek-ai/DeepSeek-V3.2 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3.2", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "deepseek-ai/DeepSeek-V3.2-Exp config.json (the DeepSeek-V3.2 architecture, block fp8)"},
    {"nvidia/DeepSeek-V3.2-NVFP4", "deepseek-v3.2", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/DeepSeek-V3.2-NVFP4 hf_quant_config.json (routed experts NVFP4; attention, indexer, dense "
     "layers and shared experts excluded; FP8 KV)"},
    {"moonshotai/Kimi-K2-Instruct", "kimi-k2", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "moonshotai/Kimi-K2-Instruct config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"moonshotai/Kimi-K2-Instruct-0905", "kimi-k2", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "moonshotai/Kimi-K2-Instruct-0905 config.json (the Kimi-K2 architecture, block fp8)"},
    {"moonshotai/Kimi-K2.5", "kimi-k2.5", kBf16, kW4A16, kBf16, "int4_wo", false,
     "moonshotai/Kimi-K2.5 config.json quantization_config (compressed-tensors int4 group 32 of the "
     "routed experts; self_attn, shared experts, dense MLP and lm_head ignored)"},
    {"moonshotai/Kimi-K3", "kimi-k3", kBf16, kMxfp4, kBf16, "mxfp4,w4a16_mxfp4", false,
     "moonshotai/Kimi-K3 config.json text_config quantization_config (compressed-tensors mxfp4-pack-"
     "quantized, a scale per 32, of the routed experts; self_attn, shared experts, the dense MLP and "
     "lm_head ignored: bf16; kv_cache_scheme null)"},
    {"nvidia/Kimi-K2.5-NVFP4", "kimi-k2.5", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Kimi-K2.5-NVFP4 (ModelOpt NVFP4 of the routed experts; self_attn and shared experts "
     "excluded as nvidia/Kimi-K2.6-NVFP4 hf_quant_config.json; FP8 KV)"},
    {"nvidia/Kimi-K2.6-NVFP4", "kimi-k2.5", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Kimi-K2.6-NVFP4 config.json (text_config: Kimi-K2.5's DeepSeek-V3 text model, 262144 "
     "positions) and hf_quant_config.json (NVFP4 routed experts; layer 0, self_attn, shared experts "
     "and lm_head excluded; FP8 KV)"},
    {"nvidia/Kimi-K2.7-Code-NVFP4", "kimi-k2.5", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Kimi-K2.7-Code-NVFP4 config.json (text_config: Kimi-K2.5's text model) and "
     "hf_quant_config.json (as Kimi-K2.6-NVFP4's)"},
    {"MiniMaxAI/MiniMax-M2", "minimax-m2.5", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "MiniMaxAI/MiniMax-M2 config.json (the MiniMax-M2.5 architecture, block fp8)"},
    {"MiniMaxAI/MiniMax-M2.1", "minimax-m2.5", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "MiniMaxAI/MiniMax-M2.1 config.json (the MiniMax-M2.5 architecture, block fp8)"},
    {"MiniMaxAI/MiniMax-M2.5", "minimax-m2.5", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "MiniMaxAI/MiniMax-M2.5 config.json quantization_config (fp8, weight_block_size [128, 128]; "
     "gate and lm_head not converted)"},
    {"nvidia/MiniMax-M2.5-NVFP4", "minimax-m2.5", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/MiniMax-M2.5-NVFP4 hf_quant_config.json (experts NVFP4; self_attn and router excluded; "
     "FP8 KV)"},
    {"MiniMaxAI/MiniMax-M2.7", "minimax-m2.7", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "MiniMaxAI/MiniMax-M2.7 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"nvidia/MiniMax-M2.7-NVFP4", "minimax-m2.7", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/MiniMax-M2.7-NVFP4 hf_quant_config.json (experts NVFP4; self_attn and router excluded; "
     "FP8 KV)"},
    {"MiniMaxAI/MiniMax-M3", "minimax-m3", kBf16, kBf16, kBf16, "bfloat16", false,
     "MiniMaxAI/MiniMax-M3 config.json (bf16, no quantization_config)"},
    {"nvidia/MiniMax-M3-NVFP4", "minimax-m3", kBlock, kNvfp4, kBf16, "nvfp4", false,
     "nvidia/MiniMax-M3-NVFP4 hf_quant_config.json (MIXED_PRECISION: routed experts NVFP4; self_attn with "
     "its index projections, the dense MLPs and the shared experts MXFP8, taken as fp8_block (an e8m0 "
     "scale per 32 elements, not modelled); router gates excluded; kv_cache_quant_algo null: bf16 KV)"},
    // DeepSeek-V4: the KV cache in fp8 whatever the checkpoint (the family's attention kernels'
    // cache layout; AIConfigurator's default for it), kv_cache_quant_algo null notwithstanding.
    {"deepseek-ai/DeepSeek-V4-Flash", "deepseek-v4-flash", kBlock, kMxfp4, kFp8,
     "fp8_block,fp8,w4a8_mxfp4_mxfp8,w4a8_mxfp4_mxfp8_trtllm,w4a16_mxfp4_cutlass", false,
     "deepseek-ai/DeepSeek-V4-Flash config.json (quantization_config fp8, weight_block_size [128, 128]; "
     "expert_dtype fp4: MXFP4 routed experts)"},
    {"deepseek-ai/DeepSeek-V4-Pro", "deepseek-v4-pro", kBlock, kMxfp4, kFp8,
     "fp8_block,fp8,w4a8_mxfp4_mxfp8,w4a8_mxfp4_mxfp8_trtllm,w4a16_mxfp4_cutlass", false,
     "deepseek-ai/DeepSeek-V4-Pro config.json (quantization_config fp8, weight_block_size [128, 128]; "
     "expert_dtype fp4: MXFP4 routed experts)"},
    {"sgl-project/DeepSeek-V4-Flash-FP8", "deepseek-v4-flash", kBlock, kBlock, kFp8, "fp8_block,fp8", false,
     "sgl-project/DeepSeek-V4-Flash-FP8 config.json (quantization_config fp8, weight_block_size [128, 128]; no "
     "expert_dtype: fp8 experts)"},
    {"sgl-project/DeepSeek-V4-Pro-FP8", "deepseek-v4-pro", kBlock, kBlock, kFp8, "fp8_block,fp8", false,
     "sgl-project/DeepSeek-V4-Pro-FP8 config.json (quantization_config fp8, weight_block_size [128, 128]; no "
     "expert_dtype: fp8 experts)"},
    {"nvidia/DeepSeek-V4-Flash-NVFP4", "deepseek-v4-flash", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/DeepSeek-V4-Flash-NVFP4 hf_quant_config.json (MIXED_PRECISION: routed experts NVFP4; attn, shared "
     "experts, head and mtp excluded)"},
    {"nvidia/DeepSeek-V4-Pro-NVFP4", "deepseek-v4-pro", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/DeepSeek-V4-Pro-NVFP4 hf_quant_config.json (MIXED_PRECISION: routed experts NVFP4; attn, shared "
     "experts, head and mtp excluded)"},
    {"Qwen/Qwen3.5-397B-A17B", "qwen3.5-397b-a17b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3.5-397B-A17B config.json (bf16)"},
    {"Qwen/Qwen3.5-397B-A17B-FP8", "qwen3.5-397b-a17b", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "Qwen/Qwen3.5-397B-A17B-FP8 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"nvidia/Qwen3.5-397B-A17B-NVFP4", "qwen3.5-397b-a17b", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Qwen3.5-397B-A17B-NVFP4 hf_quant_config.json (routed experts NVFP4; linear_attn, "
     "self_attn and shared experts excluded; FP8 KV)"},
    {"Qwen/Qwen3.5-122B-A10B", "qwen3.5-122b-a10b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3.5-122B-A10B config.json (bf16)"},
    {"nvidia/Qwen3.5-122B-A10B-NVFP4", "qwen3.5-122b-a10b", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Qwen3.5-122B-A10B-NVFP4 hf_quant_config.json (routed experts NVFP4; linear_attn, "
     "self_attn and shared experts excluded; FP8 KV)"},
    {"Qwen/Qwen3.5-35B-A3B", "qwen3.5-35b-a3b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen3.5-35B-A3B config.json (bf16)"},
    {"nvidia/Qwen3.6-35B-A3B-NVFP4", "qwen3.5-35b-a3b", kFp8, kW4A16, kFp8, "nvfp4", false,
     "nvidia/Qwen3.6-35B-A3B-NVFP4 config.json (Qwen3.5-35B-A3B's text model, the same figures) and "
     "hf_quant_config.json (MIXED_PRECISION: attention and linear attention FP8, routed and shared "
     "experts W4A16_NVFP4, weight-only; FP8 KV)"},
    {"Qwen/Qwen3.5-27B", "qwen3.5-27b", kBf16, kBf16, kBf16, "bfloat16", false, "Qwen/Qwen3.5-27B config.json (bf16)"},
    {"nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron-3-nano-30b-a3b", kBf16, kBf16, kBf16, "bfloat16", false,
     "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json (bf16)"},
    {"nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "nemotron-3-nano-30b-a3b", kNvfp4, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 hf_quant_config.json (NVFP4; excluded, kept bf16: the six "
     "attention layers, the Mamba-2 projections of the six layers before them, every conv1d and lm_head, "
     "which one weight format cannot say: costed as NVFP4; FP8 KV)"},
    {"nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4", "nemotron-3-nano-30b-a3b", kFp8, kW4A16, kFp8, "nvfp4",
     false,
     "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4 config.json (Nemotron-3-Nano-30B-A3B's blocks and "
     "figures, 1048576 positions against the preset's 262144) and hf_quant_config.json (MIXED_PRECISION: Mamba-2 "
     "projections FP8, experts W4A16_NVFP4; FP8 KV)"},
    {"nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "nemotron-3-super-120b-a12b", kFp8, kFp8, kFp8, "fp8,fp8_static",
     false, "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 hf_quant_config.json (FP8, FP8 KV; no exclusions listed)"},
    {"nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "nemotron-3-super-120b-a12b", kNvfp4, kNvfp4, kFp8, "nvfp4",
     false,
     "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4 hf_quant_config.json (NVFP4, FP8 KV; no exclusions listed)"},
    {"nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", "nemotron-3-ultra-550b-a55b", kBf16, kBf16, kBf16, "bfloat16",
     false, "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16 config.json (bf16)"},
    {"nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8", "nemotron-3-ultra-550b-a55b", kFp8, kFp8, kFp8, "fp8,fp8_static",
     false, "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8 hf_quant_config.json (FP8, FP8 KV; no exclusions listed)"},
    {"nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "nemotron-3-ultra-550b-a55b", kNvfp4, kNvfp4, kFp8, "nvfp4",
     false,
     "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4 hf_quant_config.json (NVFP4, FP8 KV; no exclusions listed)"},
    {"nvidia/Nemotron-H-56B-Base-8K", "nemotron-h-56b", kBf16, kBf16, kBf16, "bfloat16", false,
     "nvidia/Nemotron-H-56B-Base-8K config.json (bf16)"},
    {"zai-org/GLM-5", "glm-5", kBf16, kBf16, kBf16, "bfloat16", false, "zai-org/GLM-5 config.json (bf16)"},
    {"zai-org/GLM-5-FP8", "glm-5", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "zai-org/GLM-5-FP8 config.json quantization_config (fp8, weight_block_size [128, 128]; norms, "
     "indexer weights_proj, router and lm_head not converted)"},
    {"nvidia/GLM-5-NVFP4", "glm-5", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/GLM-5-NVFP4 hf_quant_config.json (routed experts NVFP4; self_attn, indexer and dense "
     "layers excluded; FP8 KV)"},
    {"zai-org/GLM-5.1", "glm-5", kBf16, kBf16, kBf16, "bfloat16", false,
     "zai-org/GLM-5.1 config.json: the GLM-5 architecture (glm_moe_dsa, the same figures)"},
    {"zai-org/GLM-5.1-FP8", "glm-5", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "zai-org/GLM-5.1-FP8 config.json (the GLM-5 architecture, block fp8)"},
    {"nvidia/GLM-5.1-NVFP4", "glm-5", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/GLM-5.1-NVFP4 hf_quant_config.json (routed experts NVFP4; self_attn and shared experts "
     "excluded; FP8 KV)"},
    {"nvidia/Gemma-4-31B-IT-NVFP4", "gemma-4-31b", kBf16, kBf16, kFp8, "nvfp4", false,
     "nvidia/Gemma-4-31B-IT-NVFP4 hf_quant_config.json (NVFP4 MLPs; self_attn, lm_head and the vision tower "
     "excluded; FP8 KV)"},
    {"nvidia/Qwen3.6-27B-NVFP4", "qwen3.5-27b", kFp8, kFp8, kFp8, "nvfp4", false,
     "nvidia/Qwen3.6-27B-NVFP4 config.json (text_config: Qwen3.5-27B's architecture) and hf_quant_config.json "
     "(MIXED_PRECISION: FP8 attention and linear-attention projections, W4A16_NVFP4 MLPs and lm_head; FP8 KV)"},
    {"google/gemma-4-26B-A4B", "gemma-4-26b-a4b", kBf16, kBf16, kBf16, "bfloat16", false,
     "google/gemma-4-26B-A4B config.json (bf16; text model, the vision tower is neither run nor held)"},
    {"nvidia/Gemma-4-26B-A4B-NVFP4", "gemma-4-26b-a4b", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/Gemma-4-26B-A4B-NVFP4 hf_quant_config.json (routed experts NVFP4; self_attn, the dense mlp, "
     "router and lm_head excluded; FP8 KV)"},
    {"XiaomiMiMo/MiMo-V2-Flash", "mimo-v2-flash", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "XiaomiMiMo/MiMo-V2-Flash config.json quantization_config (fp8 e4m3, weight_block_size [128, 128])"},
    {"XiaomiMiMo/MiMo-7B-Base", "mimo-7b", kBf16, kBf16, kBf16, "bfloat16", false,
     "XiaomiMiMo/MiMo-7B-Base config.json (bf16)"},
    {"stepfun-ai/Step-3.7-Flash", "step-3.7-flash", kBf16, kBf16, kBf16, "bfloat16", false,
     "stepfun-ai/Step-3.7-Flash config.json (bf16)"},
    {"stepfun-ai/Step-3.7-Flash-FP8", "step-3.7-flash", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "stepfun-ai/Step-3.7-Flash-FP8 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"zai-org/GLM-5.2", "glm-5.2", kBf16, kBf16, kBf16, "bfloat16", false, "zai-org/GLM-5.2 config.json (bf16)"},
    {"zai-org/GLM-5.2-FP8", "glm-5.2", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "zai-org/GLM-5.2-FP8 config.json quantization_config (fp8 e4m3, weight_block_size [128, 128]; norms, "
     "indexer weights_proj, router and lm_head not converted)"},
    {"nvidia/GLM-5.2-NVFP4", "glm-5.2", kBf16, kNvfp4, kFp8, "nvfp4", false,
     "nvidia/GLM-5.2-NVFP4 hf_quant_config.json (routed experts NVFP4; layers 0-2, self_attn and shared "
     "experts excluded; FP8 KV)"},
    {"zai-org/GLM-4.5", "glm-4.5", kBf16, kBf16, kBf16, "bfloat16", false, "zai-org/GLM-4.5 config.json (bf16)"},
    {"zai-org/GLM-4.5-FP8", "glm-4.5", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "zai-org/GLM-4.5-FP8 config.json quantization_config (fp8, weight_block_size [128, 128])"},
    {"zai-org/GLM-4.5-Air", "glm-4.5-air", kBf16, kBf16, kBf16, "bfloat16", false,
     "zai-org/GLM-4.5-Air config.json (bf16)"},
    {"zai-org/GLM-4.5-Air-FP8", "glm-4.5-air", kBlock, kBlock, kBf16, "fp8_block,fp8", false,
     "zai-org/GLM-4.5-Air-FP8 config.json (block fp8)"},
    {"openai/gpt-oss-120b", "gpt-oss-120b", kBf16, kMxfp4, kBf16, "", true,
     "openai/gpt-oss-120b config.json quantization_config (mxfp4 experts; attention, router, embedding "
     "and lm_head bf16): the one checkpoint its benchmarks serve, whatever quant mode they record"},
    {"openai/gpt-oss-20b", "gpt-oss-20b", kBf16, kMxfp4, kBf16, "", true,
     "openai/gpt-oss-20b config.json quantization_config (mxfp4 experts; attention, router, embedding "
     "and lm_head bf16), pinned as gpt-oss-120b"},
    {"Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl-7b", kBf16, kBf16, kBf16, "bfloat16", false,
     "Qwen/Qwen2.5-VL-7B-Instruct config.json (bf16)"},
};

std::vector<std::string> split_modes(std::string_view s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < s.size()) {
    std::size_t end = s.find(',', at);
    if (end == std::string_view::npos) end = s.size();
    if (end > at) out.emplace_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::vector<Checkpoint> build_table() {
  std::vector<Checkpoint> out;
  for (const Row& r : kRows) {
    Checkpoint c;
    c.id = r.id;
    c.preset = r.preset;
    c.formats = {r.weights, r.experts, r.kv, r.weights};
    for (const MlpFormat& f : kMlpFormats) {
      if (std::string_view(f.id) == r.id) c.formats.mlp = f.mlp;
    }
    c.native_modes = split_modes(r.native);
    c.pinned = r.pinned;
    c.source = r.source;
    out.push_back(std::move(c));
  }
  return out;
}

std::string_view name_of(std::string_view id) {
  const std::size_t slash = id.rfind('/');
  return slash == std::string_view::npos ? id : id.substr(slash + 1);
}

// Variant suffixes, lower case, and the formats a suffix implies (kBf16 for none).
struct Suffix {
  const char* text;
  const char* mode;  // the quant mode a checkpoint so named publishes ("" = none)
};
constexpr Suffix kSuffixes[] = {{"-instruct", ""}, {"-fp8", "fp8_block"}, {"-nvfp4", "nvfp4"}, {"-fp4", "nvfp4"},
                                {"-bf16", ""},     {"-2507", ""},         {"-0528", ""},       {"-0905", ""},
                                {"-thinking", ""}, {"-base", ""},         {"-exp", ""},        {"-hf", ""}};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

const std::vector<Checkpoint>& checkpoint_table() {
  static const std::vector<Checkpoint> kTable = build_table();
  return kTable;
}

std::optional<Checkpoint> checkpoint_of_preset(std::string_view preset, std::string_view mode) {
  for (const Checkpoint& c : checkpoint_table()) {
    if (c.preset != preset) continue;
    if (std::find(c.native_modes.begin(), c.native_modes.end(), mode) != c.native_modes.end()) return c;
  }
  return std::nullopt;
}

std::optional<Checkpoint> checkpoint(std::string_view model_path) {
  const std::string id = lower(model_path);
  const std::string name = lower(name_of(model_path));
  for (const Checkpoint& c : checkpoint_table()) {
    if (lower(c.id) == id) return c;
  }
  for (const Checkpoint& c : checkpoint_table()) {
    if (lower(name_of(c.id)) == name) {
      Checkpoint m = c;
      m.derived = "read as " + c.id + " (the same name under another organisation)";
      return m;
    }
  }
  // Take variant suffixes off the end until the rest names an entry or a preset.
  std::string rest = name;
  std::string mode;
  std::vector<std::string> taken;
  for (bool progress = true; progress;) {
    progress = false;
    for (const Suffix& s : kSuffixes) {
      if (!ends_with(rest, s.text)) continue;
      rest.resize(rest.size() - std::string_view(s.text).size());
      taken.emplace_back(s.text);
      if (mode.empty()) mode = s.mode;
      progress = true;
      break;
    }
    if (!progress) break;
    std::optional<Checkpoint> base;
    for (const Checkpoint& c : checkpoint_table()) {
      if (lower(name_of(c.id)) == rest) {
        base = c;
        break;
      }
    }
    if (!base && models::model_preset(rest)) {
      Checkpoint c;
      c.id = rest;
      c.preset = rest;
      c.source = "the preset " + rest;
      c.native_modes = {"bfloat16"};
      base = c;
    }
    if (!base) continue;
    std::string words;
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) words += *it;
    Checkpoint m = *base;
    m.id = std::string(model_path);
    m.derived = "not in the checkpoint table: read as " + base->id + " with the suffix '" + words + "'";
    if (!mode.empty()) {
      // The formats this family publishes under that suffix: the table's checkpoint of the same
      // preset with the mode, else the mode's format everywhere.
      if (auto v = checkpoint_of_preset(m.preset, mode)) {
        m.formats = v->formats;
        m.derived += " (formats of " + v->id + ")";
      } else {
        const Format f = mode == "nvfp4" ? Format::kNvfp4 : Format::kFp8Block;
        m.formats = {f, f, Format::kBf16, f};
        m.derived += " (" + mode + " weights)";
      }
      m.native_modes = {mode};
    }
    m.pinned = base->pinned;
    return m;
  }
  return std::nullopt;
}

}  // namespace servesim::studies
