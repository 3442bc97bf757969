#!/usr/bin/env python3
"""Copies the handful of H200 operator measurements that `servesim_compare_h200` prints next to
the roofline into models/data/h200_operator_sample.csv (see models/data/SOURCE.md).

Run from the repository root with the folder of AIConfigurator's H200 operator CSVs
(ai-dynamo/aiconfigurator, the csv/data/h200_sxm folder of its data release):
    python3 scripts/extract_h200_sample.py PATH/TO/csv/data/h200_sxm

The shapes: one layer of Llama-3.1-8B at TP 4 (every GEMM and attention shape of it is on the
collector's grid), a decode iteration and a prefill chunk of that layer, and three MoE layers
(Qwen3-235B-A22B bf16, DeepSeek-V3 fp8 block-scaled, gpt-oss-120b MXFP4 weight-only).
"""
import csv
import gzip
import sys
from pathlib import Path

COLUMNS = ["kind", "label", "dtype", "m", "n", "k", "batch", "isl", "heads", "kv_heads",
           "head_dim", "hidden", "inter", "topk", "experts", "moe_tp", "moe_ep", "distribution",
           "latency_ms", "source"]

# Llama-3.1-8B at TP 4: hidden 4096, 8 query and 2 KV heads of 128 per chip, MLP 14336 / 4.
GEMMS = [("qkv", 1536, 4096), ("o", 4096, 1024), ("gate_up", 7168, 4096), ("down", 4096, 3584)]
GEMM_M = [1, 16, 64, 256, 1024, 2048, 4096]
CONTEXT = [(1, 512), (1, 2048), (1, 8192), (8, 1024)]            # batch, prompt
GENERATION = [(1, 1024), (16, 2048), (64, 2048), (128, 4096)]    # batch, context
MOE = [
    ("qwen3-235b-a22b ep8", "bfloat16", 4096, 1536, 8, 128, 1, 8, "balanced"),
    ("qwen3-235b-a22b ep8 skewed", "bfloat16", 4096, 1536, 8, 128, 1, 8, "power_law_1.2"),
    ("deepseek-v3 ep8", "fp8_block", 7168, 2048, 8, 256, 1, 8, "balanced"),
    ("gpt-oss-120b", "w4a16_mxfp4", 2880, 2880, 4, 128, 1, 1, "balanced"),
]
MOE_TOKENS = [1, 16, 128, 1024, 4096]


def rows(path):
    with gzip.open(path, "rt") as f:
        yield from csv.DictReader(f)


def main(root):
    root = Path(root)
    out = []
    gemm = {}
    for r in rows(root / "gemm/trtllm/1.3.0rc20/gemm_perf.csv.gz"):
        gemm[(r["gemm_dtype"], int(r["m"]), int(r["n"]), int(r["k"]))] = r["latency"]
    for dtype in ["bfloat16", "fp8"]:
        for label, n, k in GEMMS:
            for m in GEMM_M:
                lat = gemm[(dtype, m, n, k)]
                out.append({"kind": "gemm", "label": label, "dtype": dtype, "m": m, "n": n, "k": k,
                            "latency_ms": lat, "source": "gemm_perf.csv.gz"})
    ctx = {}
    for r in rows(root / "attention/trtllm/1.3.0rc20/context_attention_perf.csv.gz"):
        if (r["num_heads"], r["num_key_value_heads"], r["head_dim"], r["attn_dtype"],
                r["kv_cache_dtype"], r["window_size"]) == ("8", "2", "128", "bfloat16", "bfloat16", "0"):
            ctx[(int(r["batch_size"]), int(r["isl"]))] = r["latency"]
    for b, s in CONTEXT:
        out.append({"kind": "context_attention", "label": "llama-3.1-8b tp4", "dtype": "bfloat16",
                    "batch": b, "isl": s, "heads": 8, "kv_heads": 2, "head_dim": 128,
                    "latency_ms": ctx[(b, s)], "source": "context_attention_perf.csv.gz"})
    gen = {}
    for r in rows(root / "attention/trtllm/1.3.0rc20/generation_attention_perf.csv.gz"):
        if (r["num_heads"], r["num_key_value_heads"], r["head_dim"], r["attn_dtype"],
                r["kv_cache_dtype"], r["window_size"]) == ("8", "2", "128", "bfloat16", "bfloat16", "0"):
            # One decode step for batch_size sequences whose KV length is isl + step.
            gen.setdefault((int(r["batch_size"]), int(r["isl"]) + int(r["step"])), r["latency"])
    for b, s in GENERATION:
        key = min((k for k in gen if k[0] == b), key=lambda k: abs(k[1] - s))
        out.append({"kind": "generation_attention", "label": "llama-3.1-8b tp4", "dtype": "bfloat16",
                    "batch": b, "isl": key[1], "heads": 8, "kv_heads": 2, "head_dim": 128,
                    "latency_ms": gen[key], "source": "generation_attention_perf.csv.gz"})
    moe = {}
    for r in rows(root / "moe/trtllm/1.3.0rc20/moe_perf.csv.gz"):
        moe[(r["moe_dtype"], int(r["hidden_size"]), int(r["inter_size"]), int(r["topk"]),
             int(r["num_experts"]), int(r["moe_tp_size"]), int(r["moe_ep_size"]),
             r["distribution"], int(r["num_tokens"]))] = r["latency"]
    for label, dtype, h, inter, topk, e, tp, ep, dist in MOE:
        for t in MOE_TOKENS:
            out.append({"kind": "moe", "label": label, "dtype": dtype, "m": t, "hidden": h,
                        "inter": inter, "topk": topk, "experts": e, "moe_tp": tp, "moe_ep": ep,
                        "distribution": dist,
                        "latency_ms": moe[(dtype, h, inter, topk, e, tp, ep, dist, t)],
                        "source": "moe_perf.csv.gz"})
    target = Path("models/data/h200_operator_sample.csv")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in out:
            w.writerow({c: r.get(c, "") for c in COLUMNS})
    print(f"wrote {len(out)} rows to {target}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/extract_h200_sample.py PATH/TO/csv/data/h200_sxm")
    main(sys.argv[1])
