// servesim_compare_h200: the roofline cost of a few operators, of a decode iteration and of a
// prefill chunk, printed next to H200 measurements (AIConfigurator's TensorRT-LLM 1.3.0rc20
// operator tables; the rows are in models/data/h200_operator_sample.csv, provenance in
// models/data/SOURCE.md). A first look, not a fit: the h200-sxm preset's efficiencies are
// transferred from H100 (chip_spec.cpp), and nothing here was tuned to these rows.
//
//   build/servesim_compare_h200 [models/data/h200_operator_sample.csv]
//
// Roofline figures come from the project's own operator builders (models/operators.h) and
// RooflineCostModel, for the shape each measurement names. The decode iteration and the prefill
// chunk are one Llama-3.1-8B layer at TP 4 (QKV, O, gate|up and down GEMMs and attention) x 32
// layers: the operators both sides have; elementwise kernels, the all-reduces and the LM head are
// left out of both.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_options.h"
#include "core/errors.h"
#include "core/input_file.h"
#include "models/chip_spec.h"
#include "models/cost_model.h"
#include "models/model_spec.h"
#include "models/operators.h"

using namespace servesim;
using namespace servesim::models;

namespace {

using Row = std::map<std::string, std::string>;

std::vector<Row> read_csv(const std::string& path) {
  std::istringstream in(read_input_file(InputSource{path, "measurement file", ""}, kMaxTableBytes));
  std::vector<Row> rows;
  std::string line;
  std::vector<std::string> header;
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string f;
    while (std::getline(ss, f, ',')) out.push_back(f);
    if (!s.empty() && s.back() == ',') out.emplace_back();
    return out;
  };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto fields = split(line);
    if (header.empty()) {
      header = fields;
      continue;
    }
    Row r;
    for (std::size_t i = 0; i < header.size() && i < fields.size(); ++i) r[header[i]] = fields[i];
    rows.push_back(r);
  }
  return rows;
}

double num(const Row& r, const char* key) {
  const auto it = r.find(key);
  if (it == r.end() || it->second.empty()) return 0.0;
  double v = 0;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || end != it->second.data() + it->second.size()) {
    throw InputError({Diagnostic{"", 0, 0, key, "'" + it->second + "' is not a number"}});
  }
  return v;
}

Format format_of(const std::string& aic) {
  if (aic == "fp8") return Format::kFp8;
  if (aic == "fp8_block") return Format::kFp8Block;
  if (aic == "w4a16_mxfp4") return Format::kMxfp4;
  return Format::kBf16;
}

// Llama-3.1-8B's attention at TP 4: 8 query and 2 KV heads of 128 per chip.
ModelSpec attention_model(const Row& r) {
  ModelSpec m = *model_preset("llama-3.1-8b");
  m.heads = static_cast<int>(num(r, "heads"));
  m.kv_heads = static_cast<int>(num(r, "kv_heads"));
  m.head_dim = static_cast<int>(num(r, "head_dim"));
  return m;
}

struct Compared {
  double measured_s = 0, roofline_s = 0;
};

void print(const std::string& what, const std::string& shape, const Compared& c) {
  std::printf("%-34s %-26s %12.1f %12.1f %8.2f\n", what.c_str(), shape.c_str(), c.measured_s * 1e6, c.roofline_s * 1e6,
              c.roofline_s / c.measured_s);
}

// The comparison table over the measurement rows. Throws on a malformed row.
int compare(const std::vector<Row>& rows) {
  const ChipSpec chip = *chip_preset("h200-sxm");
  const RooflineCostModel roofline(chip);
  const std::array<bool, kComputeRates> rates = chip.rates();

  std::printf("H200 (h200-sxm preset) roofline vs AIConfigurator TensorRT-LLM 1.3.0rc20 measurements\n");
  std::printf("%-34s %-26s %12s %12s %8s\n", "operator", "shape", "measured us", "roofline us", "ratio");
  // Per-layer sums for the composites, keyed by dtype and token count.
  std::map<std::pair<std::string, int>, Compared> gemm_layer;
  std::map<std::pair<int, int>, Compared> context, generation;
  for (const Row& r : rows) {
    const std::string kind = r.at("kind");
    Compared c;
    c.measured_s = num(r, "latency_ms") * 1e-3;
    char shape[64];
    if (kind == "gemm") {
      const double m = num(r, "m"), n = num(r, "n"), k = num(r, "k");
      c.roofline_s = roofline.seconds(gemm_op(OpKind::kGemmMlp, format_of(r.at("dtype")), m, k, n, rates));
      std::snprintf(shape, sizeof shape, "m=%.0f n=%.0f k=%.0f", m, n, k);
      print("gemm " + r.at("label") + " " + r.at("dtype"), shape, c);
      Compared& layer = gemm_layer[{r.at("dtype"), static_cast<int>(m)}];
      layer.measured_s += c.measured_s;
      layer.roofline_s += c.roofline_s;
    } else if (kind == "context_attention" || kind == "generation_attention") {
      const ModelSpec m = attention_model(r);
      const int batch = static_cast<int>(num(r, "batch")), isl = static_cast<int>(num(r, "isl"));
      BatchShape b;
      for (int i = 0; i < batch; ++i) {
        if (kind == "context_attention")
          add_chunk(b, m, 0, isl, true);
        else
          add_decode(b, m, isl);
      }
      ParallelPlan one;
      const LayerBatchOps ops = layer_batch_ops(m, one, b);
      c.roofline_s = roofline.seconds(kind == "context_attention" ? ops.prefill_full : ops.decode_full);
      std::snprintf(shape, sizeof shape, "b=%d %s=%d h=8/2x128", batch, kind == "context_attention" ? "isl" : "kv",
                    isl);
      print(kind == "context_attention" ? "context attention" : "generation attention", shape, c);
      (kind == "context_attention" ? context : generation)[{batch, isl}] = c;
    } else if (kind == "moe") {
      ModelSpec m = *model_preset("llama-3.1-8b");
      m.name = r.at("label");
      m.hidden = static_cast<int>(num(r, "hidden"));
      m.moe.experts = static_cast<int>(num(r, "experts"));
      m.moe.top_k = static_cast<int>(num(r, "topk"));
      m.moe.expert_intermediate = static_cast<int>(num(r, "inter"));
      m.formats.experts = format_of(r.at("dtype"));
      m.formats.emulate = true;  // MXFP4 on H200: the weight-only kernel the measurement used
      ParallelPlan p;
      p.ep = static_cast<int>(num(r, "moe_ep"));
      p.moe_tp = static_cast<int>(num(r, "moe_tp"));
      p.dp = p.ep * p.moe_tp;  // the tokens of the whole EP group enter the layer
      MoeRouting routing;
      const std::string dist = r.at("distribution");
      if (dist.rfind("power_law_", 0) == 0) {
        routing.distribution = MoeRouting::Distribution::kPowerLaw;
        routing.alpha = std::stod(dist.substr(10));
      }
      const double tokens = num(r, "m");
      const LayerTokenOps ops = layer_token_ops(m, p, MoeLoad(m, p, routing), tokens, rates);
      c.roofline_s = roofline.seconds(ops.moe_experts) + roofline.seconds(ops.dequant_moe);
      std::snprintf(shape, sizeof shape, "tokens=%.0f %s", tokens, dist.c_str());
      print("moe " + r.at("label") + " " + r.at("dtype"), shape, c);
    }
  }

  std::printf("\nOne Llama-3.1-8B layer at TP 4 (QKV + O + gate|up + down + attention) x 32 layers\n");
  auto composite = [&](const char* what, const std::string& dtype, int tokens,
                       const std::map<std::pair<int, int>, Compared>& attention, std::pair<int, int> key) {
    const auto g = gemm_layer.find({dtype, tokens});
    const auto a = attention.find(key);
    if (g == gemm_layer.end() || a == attention.end()) return;
    Compared c;
    c.measured_s = 32 * (g->second.measured_s + a->second.measured_s);
    c.roofline_s = 32 * (g->second.roofline_s + a->second.roofline_s);
    char shape[64];
    std::snprintf(shape, sizeof shape, "%s, %d tokens", dtype.c_str(), tokens);
    print(what, shape, c);
  };
  composite("decode iteration, 64 x 2048 ctx", "bfloat16", 64, generation, {64, 2048});
  composite("decode iteration, 64 x 2048 ctx", "fp8", 64, generation, {64, 2048});
  composite("prefill chunk, 2048 new tokens", "bfloat16", 2048, context, {1, 2048});
  composite("prefill chunk, 2048 new tokens", "fp8", 2048, context, {1, 2048});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = servesim::bench::po;
  po::options_description visible("usage: servesim_compare_h200 [MEASUREMENTS.csv]\n\noptions");
  visible.add_options()("help,h", "show this help");
  po::variables_map vm;
  if (auto done = servesim::bench::parse_options(argc, argv, visible, "csv", vm)) return *done;
  const auto files = servesim::bench::positionals(vm, "csv");
  if (files.size() > 1) return servesim::bench::usage_error("give at most one measurement file", visible);
  const std::string path = files.empty() ? "models/data/h200_operator_sample.csv" : files.front();
  std::vector<Row> rows;
  try {
    rows = read_csv(path);
  } catch (const InputError& e) {
    print_diagnostics(e, std::cerr);
    return 2;
  }
  if (rows.empty()) {
    std::fprintf(stderr, "servesim_compare_h200: cannot read %s\n", path.c_str());
    return 2;
  }
  try {
    return compare(rows);
  } catch (const InputError& e) {
    print_diagnostics(e, std::cerr);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << path << ": a row this program cannot read (" << e.what() << ")\n";
    return 2;
  }
}
