#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "calibrate/aiconfigurator_reader.h"
#include "calibrate/measurement_files.h"
#include "calibrate/vidur_reader.h"
#include "test_files.h"
#include "tests/approx.h"

using namespace servesim::calibrate;
using calibrate_test::data_path;
using calibrate_test::input_errors;
using calibrate_test::TempFile;
using servesim::Diagnostic;

namespace {

const Measurement* find_row(const MeasurementSet& set, MeasuredOp op, std::uint32_t line,
                            std::string_view variant = {}) {
  for (const Measurement& m : set.rows()) {
    if (m.op == op && m.line == line && (variant.empty() || set.label(m.variant) == variant)) return &m;
  }
  return nullptr;
}

std::string aic_dir() { return data_path("calibrate/data/aiconfigurator/h200_sxm/"); }

// Each shipped table is read once per test run (the big ones take a second each under the
// sanitizers), by read_measurements as a user would.
const MeasurementSet& shipped(const std::string& relative) {
  static std::map<std::string, MeasurementSet> cache;
  auto it = cache.find(relative);
  if (it == cache.end()) it = cache.emplace(relative, read_measurements(data_path("calibrate/data/" + relative))).first;
  return it->second;
}

}  // namespace

// Every shipped compute table parses, with as many records as the file has lines after the
// header (`zcat FILE | wc -l` minus 1, counted when the files were copied) and one measurement
// per record for AIConfigurator, one per non-empty operator cell for Vidur's mlp.csv (ten
// operators per record; phi-2 has no post-attention norm, so nine).
TEST_CASE("Readers: every shipped compute table parses, row counts match the files") {
  struct Expected {
    const char* path;
    std::size_t records, measurements;
  };
  const Expected files[] = {
      {"aiconfigurator/h200_sxm/computescale_perf.csv.gz", 1628, 1628},
      {"aiconfigurator/h200_sxm/context_attention_perf.csv.gz", 75837, 75837},
      {"aiconfigurator/h200_sxm/context_mla_perf.csv.gz", 1760, 1760},
      {"aiconfigurator/h200_sxm/dsa_context_module_perf.csv.gz", 7808, 7808},
      {"aiconfigurator/h200_sxm/dsa_generation_module_perf.csv.gz", 5888, 5888},
      {"aiconfigurator/h200_sxm/encoder_attention_perf.csv.gz", 7679, 7679},
      {"aiconfigurator/h200_sxm/gdn_perf.csv.gz", 1769, 1769},
      {"aiconfigurator/h200_sxm/gemm_perf.csv.gz", 100668, 100668},
      {"aiconfigurator/h200_sxm/generation_attention_perf.csv.gz", 52033, 52033},
      {"aiconfigurator/h200_sxm/generation_mla_perf.csv.gz", 2896, 2896},
      {"aiconfigurator/h200_sxm/mamba2_perf.csv.gz", 685, 685},
      {"aiconfigurator/h200_sxm/mla_bmm_perf.csv.gz", 848, 848},
      {"aiconfigurator/h200_sxm/mla_context_module_perf.csv.gz", 3869, 3869},
      {"aiconfigurator/h200_sxm/mla_generation_module_perf.csv.gz", 5888, 5888},
      {"aiconfigurator/h200_sxm/moe_perf.csv.gz", 126522, 126522},
      {"aiconfigurator/h200_sxm/scale_matrix_perf.csv.gz", 1628, 1628},
      {"vidur/compute/a100/Qwen/Qwen-72B/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a100/codellama/CodeLlama-34b-Instruct-hf/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a100/internlm/internlm-20b/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a100/meta-llama/Llama-2-70b-hf/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a100/meta-llama/Meta-Llama-3-70B/mlp.csv.gz", 1824, 18240},
      {"vidur/compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv.gz", 1824, 18240},
      {"vidur/compute/a100/microsoft/phi-2/mlp.csv.gz", 261, 2349},
      {"vidur/compute/a40/Qwen/Qwen-72B/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a40/codellama/CodeLlama-34b-Instruct-hf/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a40/internlm/internlm-20b/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a40/meta-llama/Llama-2-70b-hf/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a40/meta-llama/Llama-2-7b-hf/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/a40/microsoft/phi-2/mlp.csv.gz", 261, 2349},
      {"vidur/compute/h100/internlm/internlm-20b/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv.gz", 1044, 10440},
      {"vidur/compute/h100/microsoft/phi-2/mlp.csv.gz", 261, 2349},
      // One record per row, prefill or decode; every row has its one operator cell.
      {"vidur/history/e2d00e9/a100/attention.csv.gz", 14658, 14658},
  };
  for (const Expected& e : files) {
    INFO(e.path);
    const MeasurementSet& set = shipped(e.path);
    REQUIRE(set.sources().size() == 1);
    CHECK(set.sources()[0].rows == e.records);
    CHECK(set.size() == e.measurements);
    CHECK(!set.label(set[0].chip).empty());
  }
}

TEST_CASE("Readers: AIConfigurator GEMM row, milliseconds to seconds") {
  const MeasurementSet& set = shipped("aiconfigurator/h200_sxm/gemm_perf.csv.gz");
  // Line 2: TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat16,4353,65536,51200,41.099622090657554
  const Measurement* m = find_row(set, MeasuredOp::gemm, 2);
  REQUIRE(m != nullptr);
  CHECK(m->format == Format::bf16);
  CHECK(m->shape.to_string() == "m=4353 n=65536 k=51200");
  CHECK(m->latency_s == approx(41.099622090657554e-3).epsilon(1e-15));
  CHECK(set.label(m->backend) == "TRTLLM 1.3.0rc20");
  CHECK(set.label(m->kernel) == "torch_flow");
  CHECK(set.label(m->chip) == "h200-sxm");
  const auto& meta = set.sources()[0].metadata;
  CHECK(std::find(meta.begin(), meta.end(), std::pair<std::string, std::string>("device", "NVIDIA H200")) !=
        meta.end());
  // 2 x 4353 x 65536 x 51200 FLOPs / 41.1 ms = 711 TFLOP/s: the "about 710 TFLOPS" SOURCE.md quotes.
  CHECK(2.0 * 4353 * 65536 * 51200 / m->latency_s / 1e12 == approx(711.0).epsilon(0.002));
}

TEST_CASE("Readers: AIConfigurator attention rows; generation attends isl + step keys") {
  const MeasurementSet& ctx = shipped("aiconfigurator/h200_sxm/context_attention_perf.csv.gz");
  // Line 2: batch 16, isl 6144, 96 heads, 1 KV head, head_dim 128, window 0, bf16 / bf16 KV,
  // step 0, 31.601961771647137 ms.
  const Measurement* c = find_row(ctx, MeasuredOp::attention_prefill, 2);
  REQUIRE(c != nullptr);
  CHECK(c->shape.to_string() == "batch=16 tokens=6144 heads=96 kv_heads=1 head_dim=128 window=0 step=0");
  CHECK(c->format == Format::bf16);
  CHECK(c->kv_format == Format::bf16);
  CHECK(c->latency_s == approx(31.601961771647137e-3).epsilon(1e-15));

  const MeasurementSet& gen = shipped("aiconfigurator/h200_sxm/generation_attention_perf.csv.gz");
  // Line 2: batch 32, isl 1, 64 heads, 64 KV heads, head_dim 64, step 1: 1 + 1 = 2 keys;
  // 0.023872000475724537 ms. Line 4 is the same with an fp8 KV cache and step 3 (4 keys).
  const Measurement* g = find_row(gen, MeasuredOp::attention_decode, 2);
  REQUIRE(g != nullptr);
  CHECK(g->shape.get(Dim::kv_len) == 2);
  CHECK(g->shape.get(Dim::batch) == 32);
  CHECK(g->latency_s == approx(0.023872000475724537e-3).epsilon(1e-15));
  const Measurement* g4 = find_row(gen, MeasuredOp::attention_decode, 4);
  REQUIRE(g4 != nullptr);
  CHECK(g4->shape.get(Dim::kv_len) == 4);
  CHECK(g4->kv_format == Format::fp8);
}

TEST_CASE("Readers: AIConfigurator MoE row keeps the routing skew and the gating") {
  const MeasurementSet& set = shipped("aiconfigurator/h200_sxm/moe_perf.csv.gz");
  // Line 2: moe_torch_flow_cutlass, fp8, 1 token, hidden 3072, inter 1024, topk 8, 256 experts,
  // TP 16, EP 16, power_law_1.01, 0.026169601082801818 ms.
  const Measurement* m = find_row(set, MeasuredOp::moe, 2);
  REQUIRE(m != nullptr);
  CHECK(m->shape.to_string() == "tokens=1 hidden=3072 inter=1024 topk=8 experts=256 tp=16 ep=16 gated=1");
  CHECK(m->format == Format::fp8);
  CHECK(set.label(m->variant) == "power_law_1.01");
  CHECK(m->latency_s == approx(0.026169601082801818e-3).epsilon(1e-15));
  // The non-gated kernel's rows say so.
  const bool any_plain = std::any_of(set.rows().begin(), set.rows().end(), [&](const Measurement& r) {
    return set.label(r.kernel) == "moe_torch_flow_nongated" && r.shape.get(Dim::gated) == 0;
  });
  CHECK(any_plain);
}

TEST_CASE("Readers: Vidur mlp.csv projections become GEMMs sharded by TP") {
  const MeasurementSet& set = shipped("vidur/compute/a100/meta-llama/Llama-2-70b-hf/mlp.csv.gz");
  CHECK(set.label(set[0].chip) == "a100-80g");
  CHECK(set.label(set[0].model) == "meta-llama/Llama-2-70b-hf");
  // Line 2: 64 heads, 8 KV heads, hidden 8192, ffn 28672, gated, 4096 tokens, TP 1.
  // QKV: k = 8192, n = (64 + 2 x 8) x 128 = 10240; median 2.872 ms.
  const Measurement* qkv = find_row(set, MeasuredOp::gemm, 2, "attn_pre_proj");
  REQUIRE(qkv != nullptr);
  CHECK(qkv->shape.to_string() == "m=4096 n=10240 k=8192 tp=1");
  CHECK(qkv->latency_s == approx(2.872e-3).epsilon(1e-12));
  CHECK(qkv->format == Format::fp16);
  // Gate|up fused: n = 2 x 28672 = 57344; median 15.9405 ms.
  const Measurement* up = find_row(set, MeasuredOp::gemm, 2, "mlp_up_proj");
  REQUIRE(up != nullptr);
  CHECK(up->shape.to_string() == "m=4096 n=57344 k=8192 tp=1");
  CHECK(up->latency_s == approx(15.9405e-3).epsilon(1e-12));
  // Down: k = 28672, n = 8192; median 8.0635 ms.
  const Measurement* down = find_row(set, MeasuredOp::gemm, 2, "mlp_down_proj");
  REQUIRE(down != nullptr);
  CHECK(down->shape.to_string() == "m=4096 n=8192 k=28672 tp=1");
  CHECK(down->latency_s == approx(8.0635e-3).epsilon(1e-12));
  // The SiLU x up activation works on ffn / TP = 28672 columns, gated.
  const Measurement* act = find_row(set, MeasuredOp::activation, 2);
  REQUIRE(act != nullptr);
  CHECK(act->shape.to_string() == "tokens=4096 inter=28672 gated=1 tp=1");
}

TEST_CASE("Readers: Vidur attention.csv prefill and decode rows") {
  const MeasurementSet& set = shipped("vidur/history/e2d00e9/a100/attention.csv.gz");
  CHECK(set.label(set[0].chip) == "a100-80g");
  // Line 2: decode, batch 1, kv_cache_size 32: 33 keys (the new token's too). Llama-2-70B at TP2:
  // 64 / 2 = 32 heads, 8 / 2 = 4 KV heads, head_dim 8192 / 64 = 128; 0.015 ms.
  const Measurement* d = find_row(set, MeasuredOp::attention_decode, 2);
  REQUIRE(d != nullptr);
  CHECK(d->shape.to_string() == "batch=1 kv_len=33 heads=32 kv_heads=4 head_dim=128 tp=2");
  CHECK(d->latency_s == approx(0.015e-3).epsilon(1e-12));
  CHECK(set.label(d->kernel) == "FLASH_ATTENTION");
  // Line 10242, the first prefill row: batch 1, a 64-token chunk, nothing cached; 0.015 ms.
  const Measurement* p = find_row(set, MeasuredOp::attention_prefill, 10242);
  REQUIRE(p != nullptr);
  CHECK(p->shape.to_string() == "batch=1 tokens=64 prefix=0 heads=32 kv_heads=4 head_dim=128 tp=2");
  CHECK(p->latency_s == approx(0.015e-3).epsilon(1e-12));
}

// The older mlp.csv schemas, from excerpts of Vidur's history (tests/calibrate/data/SOURCE.md).
TEST_CASE("Readers: Vidur's oldest mlp.csv schema (layer_norm, rms_norm, add_norm, deemb)") {
  const MeasurementSet set =
      read_vidur_mlp(data_path("tests/calibrate/data/vidur_0633efa_a40_mlp_excerpt.csv"), "a40", "");
  // 20 records x 10 operator columns, none empty.
  CHECK(set.sources()[0].rows == 20);
  CHECK(set.size() == 200);
  // Line 2: Llama-2-7B figures (32 heads, hidden 4096, ffn 11008, vocab 32768), 1 token, TP 1.
  // QKV n = (32 + 2 x 32) x 128 = 12288, 0.183 ms; the LM head (deemb) n = 32768, 0.533 ms.
  const Measurement* qkv = find_row(set, MeasuredOp::gemm, 2, "attn_pre_proj");
  REQUIRE(qkv != nullptr);
  CHECK(qkv->shape.to_string() == "m=1 n=12288 k=4096 tp=1");
  CHECK(qkv->latency_s == approx(0.183e-3).epsilon(1e-12));
  const Measurement* head = find_row(set, MeasuredOp::gemm, 2, "deemb");
  REQUIRE(head != nullptr);
  CHECK(head->shape.to_string() == "m=1 n=32768 k=4096 tp=1");
  CHECK(head->latency_s == approx(0.533e-3).epsilon(1e-12));
  const Measurement* fused = find_row(set, MeasuredOp::residual_add, 2, "add_norm");
  REQUIRE(fused != nullptr);
  CHECK(fused->latency_s == approx(0.002e-3).epsilon(1e-12));
  CHECK(find_row(set, MeasuredOp::norm, 2, "rms_norm") != nullptr);
}

TEST_CASE("Readers: Vidur's 2024-05 mlp.csv schema, empty cells counted and skipped") {
  const MeasurementSet set =
      read_vidur_mlp(data_path("tests/calibrate/data/vidur_e2d00e9_h100_mlp_excerpt.csv"), "h100-sxm", "");
  // 20 phi-2 records (non-gated, no post-attention norm): 9 measured operators each, and the
  // post_attention_layernorm cell is empty in every one of them.
  CHECK(set.sources()[0].rows == 20);
  CHECK(set.size() == 180);
  CHECK(set.sources()[0].empty_cells == 20);
  // Line 2: hidden 2560, ffn 10240, not gated: the up projection is n = 10240; 0.5175 ms.
  const Measurement* up = find_row(set, MeasuredOp::gemm, 2, "mlp_up_proj");
  REQUIRE(up != nullptr);
  CHECK(up->shape.to_string() == "m=4096 n=10240 k=2560 tp=1");
  CHECK(up->latency_s == approx(0.5175000000000001e-3).epsilon(1e-12));
  const Measurement* act = find_row(set, MeasuredOp::activation, 2);
  REQUIRE(act != nullptr);
  CHECK(act->shape.get(Dim::gated) == 0);
}

TEST_CASE("Readers: the chip and model come from the upstream folder layout") {
  CHECK(chip_from_path("x/data/profiling/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv") == "h100-sxm");
  CHECK(chip_from_path("x/csv/data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.csv.gz") == "h200-sxm");
  CHECK(chip_from_path("measurements/run1.csv").empty());
  CHECK(model_from_path("x/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv") == "meta-llama/Llama-2-7b-hf");
  CHECK(model_from_path("x/history/e2d00e9/a100/attention.csv").empty());
}

// ---- malformed input: every problem with file, line, column and column name ----

namespace {
const char* kGemmHeader = "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n";
const char* kGemmRow = "TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat16,16,4096,4096,0.01\n";
}  // namespace

TEST_CASE("Readers: malformed AIConfigurator table lists every problem at its field") {
  // Line 2 is fine. Line 3: m is "x16" at column 55 (the 54 characters before it are
  // "TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat16,": 7 + 10 + 12 + 5 + 11 + 9), and the
  // latency "-1" at column 69 (after "x16,4096,4096,", 14 more). Line 4: one field too few.
  // Line 5: format "bfloat61" at column 46 (after the 45 characters up to "torch_flow,").
  const std::string bad = std::string(kGemmHeader) + kGemmRow +
                          "TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat16,x16,4096,4096,-1\n"
                          "TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat16,16,4096,0.01\n"
                          "TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat61,16,4096,4096,0.01\n";
  const TempFile f("bad_gemm.csv", bad);
  const auto ds = input_errors([&] { read_aiconfigurator(f.path(), "h200-sxm"); });
  REQUIRE(ds.size() == 4);
  CHECK(ds[0].to_string() == f.path() + ":3:55: m: 'x16' is not a whole number");
  CHECK(ds[1].to_string() == f.path() + ":3:69: latency: a latency must be positive (milliseconds)");
  CHECK(ds[2].to_string() == f.path() + ":4:1: expected 10 comma-separated fields as in the header, found 9");
  CHECK(ds[3].to_string() == f.path() + ":5:46: gemm_dtype: unknown number format 'bfloat61'");
}

TEST_CASE("Readers: a missing column is named, with the closest one the file has") {
  const TempFile f("no_dtype.csv",
                   "framework,version,device,op_name,kernel_source,gemm_type,m,n,k,latency\n"
                   "TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat16,16,4096,4096,0.01\n");
  const auto ds = input_errors([&] { read_aiconfigurator(f.path(), "h200-sxm"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].to_string() == f.path() + ":1:1: missing column 'gemm_dtype' (did you mean 'gemm_type'?)");
}

TEST_CASE("Readers: a communication table is refused with a pointer to where it belongs") {
  const TempFile f("nccl.csv",
                   "framework,version,device,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n"
                   "NCCL,2.26.2,NVIDIA H200,all_reduce,NCCL,half,2,128,0.01\n");
  const auto ds = input_errors([&] { read_aiconfigurator(f.path(), "h200-sxm"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].line == 2);
  CHECK(ds[0].column == 25);  // after "NCCL,2.26.2,NVIDIA H200,": 5 + 7 + 12 = 24 characters
  CHECK(ds[0].message.find("communication tables") != std::string::npos);
}

TEST_CASE("Readers: mixed tables in one AIConfigurator file are an error") {
  const TempFile f("mixed.csv", std::string(kGemmHeader) + kGemmRow +
                                    "TRTLLM,1.3.0rc20,NVIDIA H200,moe,torch_flow,bfloat16,16,4096,4096,0.01\n");
  const auto ds = input_errors([&] { read_aiconfigurator(f.path(), "h200-sxm"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].to_string() == f.path() + ":3:30: op_name: 'moe' in a 'gemm' table: one table per file");
}

TEST_CASE("Readers: one AIConfigurator file may hold several builds of one engine on one device") {
  // B200's vLLM 0.24.0 MoE table appends one shape timed with a 0.1.dev build: both are read,
  // each row keeps its own build, the source lists both in order of first appearance.
  const TempFile f("builds.csv", std::string(kGemmHeader) + kGemmRow +
                                     "TRTLLM,1.3.0rc23,NVIDIA H200,gemm,torch_flow,bfloat16,32,4096,4096,0.02\n" +
                                     kGemmRow);
  const MeasurementSet set = read_aiconfigurator(f.path(), "h200-sxm");
  REQUIRE(set.size() == 3);
  CHECK(set.label(set.rows()[0].backend) == "TRTLLM 1.3.0rc20");
  CHECK(set.label(set.rows()[1].backend) == "TRTLLM 1.3.0rc23");
  std::string versions;
  for (const auto& [k, v] : set.source(0).metadata) {
    if (k == "version") versions = v;
  }
  CHECK(versions == "1.3.0rc20, 1.3.0rc23");

  // Another device (or engine) in the same file is still refused, at its field: column 18 is
  // after "TRTLLM,1.3.0rc20," (7 + 10 characters).
  const TempFile g("devices.csv", std::string(kGemmHeader) + kGemmRow +
                                      "TRTLLM,1.3.0rc20,NVIDIA B200,gemm,torch_flow,bfloat16,16,4096,4096,0.01\n");
  const auto ds = input_errors([&] { read_aiconfigurator(g.path(), "h200-sxm"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].to_string() == g.path() +
                                 ":3:18: device: 'NVIDIA B200' differs from 'NVIDIA H200' on earlier rows: one file "
                                 "holds one engine and one device");
}

TEST_CASE("Readers: malformed Vidur mlp.csv") {
  // An operator Vidur never had (a typo of mlp_act) in the header, at column 1.
  const TempFile typo("typo.csv",
                      "time_stats.mlp_akt.median,n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,"
                      "use_gated_mlp,num_tokens,num_tensor_parallel_workers\n"
                      "0.1,32,8,4096,14336,128256,True,1,1\n");
  auto ds = input_errors([&] { read_vidur_mlp(typo.path(), "a100-80g", ""); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].to_string() ==
        typo.path() + ":1:1: time_stats.mlp_akt.median: unknown Vidur operator 'mlp_akt' (did you mean 'mlp_act'?)");

  // Line 2: use_gated_mlp "yes" at column 28 (after "0.1,32,8,4096,14336,128256,", 27
  // characters); line 3: TP 3 (column 35, the last character) does not divide 32 heads.
  const TempFile bad("bad.csv",
                     "time_stats.mlp_act.median,n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,"
                     "use_gated_mlp,num_tokens,num_tensor_parallel_workers\n"
                     "0.1,32,8,4096,14336,128256,yes,1,1\n"
                     "0.1,32,8,4096,14336,128256,True,1,3\n");
  ds = input_errors([&] { read_vidur_mlp(bad.path(), "a100-80g", ""); });
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].to_string() == bad.path() + ":2:28: use_gated_mlp: expected True or False");
  CHECK(ds[1].to_string() ==
        bad.path() +
            ":3:35: num_tensor_parallel_workers: n_head 32 does not split evenly over 3 tensor-parallel workers");
}

TEST_CASE("Readers: a table with a header and no rows is an error, not an empty success") {
  const TempFile aic("empty_gemm.csv", kGemmHeader);
  auto ds = input_errors([&] { read_aiconfigurator(aic.path(), "h200-sxm"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message == "the table has a header but no rows");
  const TempFile vidur("empty_mlp.csv",
                       "time_stats.mlp_act.median,n_head,n_kv_head,n_embd,n_expanded_embd,"
                       "vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers\n\n");
  ds = input_errors([&] { read_vidur_mlp(vidur.path(), "a100-80g", ""); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message == "the table has a header but no rows");
}

TEST_CASE("Readers: a damaged gzip stream is reported, not half-read") {
  // The first 100,000 bytes of the 1.3 MB GEMM table: a gzip stream cut short.
  std::ifstream in(aic_dir() + "gemm_perf.csv.gz", std::ios::binary);
  std::string bytes(100000, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const TempFile cut("cut.csv.gz", bytes);
  const auto ds = input_errors([&] { read_aiconfigurator(cut.path(), "h200-sxm"); });
  const bool damaged = std::any_of(
      ds.begin(), ds.end(), [](const Diagnostic& d) { return d.message.find("damaged gzip") != std::string::npos; });
  CHECK(damaged);
}

TEST_CASE("Readers: files that are not compute tables, and chips that cannot be told") {
  const TempFile comm("all_reduce.csv",
                      "time_stats.all_reduce.median,size,num_workers,devices_per_node\n0.1,1024,2,2\n");
  auto ds = input_errors([&] { read_measurements(comm.path()); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message.find("not a compute-measurement table") != std::string::npos);

  const TempFile nochip("gemm.csv", std::string(kGemmHeader) + kGemmRow);
  ds = input_errors([&] { read_measurements(nochip.path()); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message.find("--chip") != std::string::npos);
  ReadOptions with_chip;
  with_chip.chip = "h200-sxm";
  CHECK(read_measurements(nochip.path(), with_chip).size() == 1);

  ds = input_errors([&] { read_measurements(std::string("/nonexistent/file.csv")); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].message == "cannot open the measurement file: No such file or directory");
}

TEST_CASE("Readers: problems of several files are reported together") {
  const TempFile a("a.csv",
                   std::string(kGemmHeader) + "TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat16,1,2,3,zero\n");
  const TempFile b("b.csv",
                   std::string(kGemmHeader) + "TRTLLM,1.3.0rc20,NVIDIA H200,gemm,torch_flow,bfloat16,1,2,-3,1\n");
  ReadOptions opts;
  opts.chip = "h200-sxm";
  const auto ds = input_errors([&] { read_measurements({a.path(), b.path()}, opts); });
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].file == a.path());
  CHECK(ds[1].file == b.path());
}

TEST_CASE("Readers: of TensorRT-LLM's two NVFP4 MoE kernels, the one it runs at each token count is kept") {
  // B200's and GB200's TensorRT-LLM MoE tables time gated NVFP4 experts with the CUTLASS kernel
  // and the min-latency one at every token count; TensorRT-LLM (and AIConfigurator's reading of
  // the table) runs min-latency up to 128 tokens, CUTLASS above. At 64 tokens the CUTLASS row
  // goes, at 256 the min-latency one; an fp8 row (CUTLASS only) and a non-gated NVFP4 row stay.
  const std::string header =
      "framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,"
      "moe_tp_size,moe_ep_size,distribution,latency\n";
  auto row = [](const char* kernel, const char* dtype, int tokens, double ms) {
    return std::string("TRTLLM,1.3.0rc20,NVIDIA B200,moe,") + kernel + "," + dtype + "," + std::to_string(tokens) +
           ",7168,2048,8,256,1,8,balanced," + std::to_string(ms) + "\n";
  };
  const TempFile f(
      "kernels.csv",
      header + row("moe_torch_flow_cutlass", "nvfp4", 64, 0.20) + row("moe_torch_flow_min_latency", "nvfp4", 64, 0.10) +
          row("moe_torch_flow_cutlass", "nvfp4", 256, 0.40) + row("moe_torch_flow_min_latency", "nvfp4", 256, 0.50) +
          row("moe_torch_flow_cutlass", "fp8", 64, 0.30) + row("moe_torch_flow_nongated", "nvfp4", 64, 0.25));
  const MeasurementSet set = read_aiconfigurator(f.path(), "b200");
  REQUIRE(set.size() == 4);
  std::vector<std::pair<std::string, std::int64_t>> kept;
  for (const auto& m : set.rows()) kept.emplace_back(set.label(m.kernel), m.shape.get(Dim::tokens));
  CHECK(kept == std::vector<std::pair<std::string, std::int64_t>>{{"moe_torch_flow_min_latency", 64},
                                                                  {"moe_torch_flow_cutlass", 256},
                                                                  {"moe_torch_flow_cutlass", 64},
                                                                  {"moe_torch_flow_nongated", 64}});
  CHECK(set.rows()[0].latency_s == approx(0.10e-3));
  CHECK(set.rows()[1].latency_s == approx(0.40e-3));
  std::string said;
  for (const auto& [k, v] : set.source(0).metadata) {
    if (k == "kernel_selection") said = v;
  }
  CHECK(said.rfind("2 rows of the NVFP4 MoE kernel TensorRT-LLM does not run", 0) == 0);
}

TEST_CASE("Readers: SGLang's top-k table keeps the top_last layout and leaves out the calls that select nothing") {
  // glm5_topk_module: each shape on two score layouts; 0 ms where every row's context fits in
  // top_k (the collector's mark: nothing to select). Of four rows one is kept.
  const std::string header =
      "framework,version,device,op_name,kernel_source,model,architecture,mla_dtype,kv_cache_dtype,gemm_type,"
      "num_heads,batch_size,isl,tp_size,step,compress_ratio,latency,score_mode\n";
  auto row = [](int step, double ms, const char* mode) {
    return std::string(
               "SGLang,kernel-level,NVIDIA H200,glm5_topk_module,fast_topk_transform_fused,zai-org/GLM-5,"
               "GlmMoeDsaForCausalLM,fp8_e4m3,fp8_e4m3,fp8_block,64,2,16,1,") +
           std::to_string(step) + ",1," + std::to_string(ms) + "," + mode + "\n";
  };
  const TempFile f("topk.csv", header + row(0, 0.0, "flat") + row(0, 0.0, "top_last") + row(8192, 0.012, "flat") +
                                   row(8192, 0.005, "top_last"));
  const MeasurementSet set = read_aiconfigurator(f.path(), "h200-sxm");
  REQUIRE(set.size() == 1);
  const Measurement& m = set.rows()[0];
  CHECK(m.op == MeasuredOp::topk_prefill);
  CHECK(m.latency_s == approx(0.005e-3));
  CHECK(m.shape.get(Dim::prefix) == 8192);
  CHECK(m.shape.get(Dim::batch) == 2);
  CHECK(m.shape.get(Dim::tokens) == 16);
  std::map<std::string, std::string> meta(set.source(0).metadata.begin(), set.source(0).metadata.end());
  CHECK(meta["left_out_score_mode"] == "2 rows not of score_mode top_last");
  CHECK(meta["left_out_no_call"] == "1 rows of latency 0 (the kernel did not run)");
}
