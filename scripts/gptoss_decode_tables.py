#!/usr/bin/env python3
"""What AIConfigurator's raw operator tables say one gpt-oss-120b decode step costs, operator by
operator, on one chip with TensorRT-LLM (for the per-operator comparison of
docs/notes/2026-12-05-gptoss-decode.md, beside build/servesim_decode_ops).

    scripts/gptoss_decode_tables.py ROOT --tp 8 --batch 4 --context 1536 [--system h200_sxm]

ROOT holds aiconfigurator/csv/data/<system>/<family>/trtllm/<version>/*.csv.gz (the tables are not
in this repository; calibrate/data/SOURCE.md). The model's shapes are openai/gpt-oss-120b's
config.json (36 layers alternating 128-token sliding-window and full attention, hidden 2880, 64 query
/ 8 KV heads of 64, 128 experts top-4 of 2880, vocab 201088). Per operator, per call:
  qkv, out, lm_head  gemm_perf bf16 at m = batch, interpolated in ln n, ln k between the four
                     measured (n, k) around the shape (the table's n and k are powers of two and
                     their 1.5x; 640, 2880, 25136 are not measured), in proportion to n beyond the
                     widest measured n (the TP 1 LM head's 201088);
  attention          generation_attention_perf bf16 at the per-chip heads (64 / tp, 8 / tp), head dim
                     64, window 0 and 128, kv_len = isl + step interpolated linearly over the context;
  moe                moe_perf w4a16_mxfp4, 128 experts, balanced, at num_tokens = batch (the MoE
                     module: routing and both grouped GEMMs; the router GEMM is separate) at
                     moe_tp 1, moe_ep = tp: the table measures moe_tp 1 only (TensorRT-LLM's Triton
                     MXFP4 backend, expert parallel), so a plan with experts tensor-parallel over
                     tp chips is shown at the expert-parallel plan holding the same weights per chip;
  all-reduce         custom_allreduce_perf (TensorRT-LLM's own) at tp GPUs, message = batch x hidden
                     elements, interpolated in ln size.
Prints the rows and the step total (layers x per-layer + LM head). Reads the tables with the
standard library only.
"""
import argparse
import csv
import gzip
import glob
import math
import os
import sys

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, TOP_K, INTER, VOCAB, WINDOW = (
    2880, 36, 64, 8, 64, 128, 4, 2880, 201088, 128)


def rows(root, system, family, table):
    pattern = os.path.join(root, "aiconfigurator/csv/data", system, family, "trtllm", "*", table + ".csv.gz")
    found = sorted(glob.glob(pattern))
    if not found:
        sys.exit(f"error: no {table} under {pattern}")
    with gzip.open(found[-1], "rt") as f:
        yield from csv.DictReader(f)


def lerp(points, x, log=False):
    """Linear interpolation over sorted (x, y) points (in ln x when log), clamped at the ends."""
    points = sorted(points)
    if not points:
        return float("nan")
    f = (lambda v: math.log(v)) if log else (lambda v: v)
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            t = (f(x) - f(x0)) / (f(x1) - f(x0)) if x1 != x0 else 0
            return y0 + t * (y1 - y0)
    return points[-1][1]


def gemm_us(gemm, m, n, k):
    ns = sorted({key[1] for key in gemm if key[0] == m})
    ks = sorted({key[2] for key in gemm if key[0] == m})
    if not ns:
        return float("nan")

    def around(values, v):
        lo = max([x for x in values if x <= v], default=values[0])
        hi = min([x for x in values if x >= v], default=values[-1])
        return lo, hi

    if n > ns[-1]:  # beyond the widest measured n (LM head): memory-bound, in proportion to n
        return gemm_us(gemm, m, ns[-1], k) * n / ns[-1]
    n0, n1 = around(ns, n)
    k0, k1 = around(ks, k)
    at_k = []
    for kk in sorted({k0, k1}):
        at_k.append((kk, lerp([(nn, gemm[(m, nn, kk)]) for nn in sorted({n0, n1}) if (m, nn, kk) in gemm], n, log=True)))
    return lerp(at_k, k, log=True) * 1000


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("root")
    p.add_argument("--system", default="h200_sxm")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--context", type=int, default=1536)
    a = p.parse_args()
    b, tp = a.batch, a.tp

    gemm = {}
    for r in rows(a.root, a.system, "gemm", "gemm_perf"):
        if r["gemm_dtype"] == "bfloat16" and int(r["m"]) == b:
            gemm[(b, int(r["n"]), int(r["k"]))] = float(r["latency"])
    attn = {0: [], WINDOW: []}
    for r in rows(a.root, a.system, "attention", "generation_attention_perf"):
        if (int(r["batch_size"]) == b and int(r["num_heads"]) == HEADS // tp and
                int(r["num_key_value_heads"]) == max(1, KV_HEADS // tp) and int(r["head_dim"]) == HEAD_DIM and
                r["kv_cache_dtype"] == "bfloat16" and int(r["window_size"]) in attn):
            attn[int(r["window_size"])].append((int(r["isl"]) + int(r["step"]), float(r["latency"]) * 1000))
    moe_ep = tp  # the table has moe_tp 1 only: the plan's expert weights per chip at moe_ep = tp
    moe = []
    for r in rows(a.root, a.system, "moe", "moe_perf"):
        if (r["moe_dtype"] == "w4a16_mxfp4" and int(r["num_experts"]) == EXPERTS and int(r["hidden_size"]) == HIDDEN and
                int(r["moe_tp_size"]) == 1 and int(r["moe_ep_size"]) == moe_ep and r["distribution"] == "balanced"):
            moe.append((int(r["num_tokens"]), float(r["latency"]) * 1000))
    ar = []
    if tp > 1:
        for r in rows(a.root, a.system, "comm", "custom_allreduce_perf"):
            if int(r["num_gpus"]) == tp and r["allreduce_dtype"] == "bfloat16":
                ar.append((int(r["message_size"]), float(r["latency"]) * 1000))

    hq, hkv = HEADS // tp, max(1, KV_HEADS // tp)
    ops = [
        ("gemm_qkv", f"m {b} n {(hq + 2 * hkv) * HEAD_DIM} k {HIDDEN}", LAYERS,
         gemm_us(gemm, b, (hq + 2 * hkv) * HEAD_DIM, HIDDEN)),
        ("gemm_out", f"m {b} n {HIDDEN} k {hq * HEAD_DIM}", LAYERS, gemm_us(gemm, b, HIDDEN, hq * HEAD_DIM)),
        ("router", f"m {b} n {EXPERTS} k {HIDDEN}", LAYERS, gemm_us(gemm, b, EXPERTS, HIDDEN)),
        ("moe (w4a16_mxfp4)", f"tokens {b} ep {moe_ep} moe_tp 1", LAYERS,
         lerp(moe, b) if moe else float("nan")),
        ("attention full", f"seqs {b} ctx {a.context} heads {hq}/{hkv}", LAYERS // 2, lerp(attn[0], a.context)),
        ("attention window", f"seqs {b} ctx {a.context} heads {hq}/{hkv} win {WINDOW}", LAYERS // 2,
         lerp(attn[WINDOW], a.context)),
        ("lm_head", f"m {b} n {VOCAB // tp} k {HIDDEN}", 1, gemm_us(gemm, b, VOCAB // tp, HIDDEN)),
    ]
    if tp > 1:
        ops.append(("all-reduce x2", f"{tp} GPUs, {b * HIDDEN} elements", 2 * LAYERS, lerp(ar, b * HIDDEN, log=True)))
    print(f"gpt-oss-120b, {a.system} TensorRT-LLM tables, tp {tp}, {b} decodes at context {a.context}")
    print(f"{'operator':<20} {'shape':<40} {'count':>5} {'us/call':>9} {'us/step':>9}")
    total = 0.0
    for name, shape, count, us in ops:
        total += count * us
        print(f"{name:<20} {shape:<40} {count:>5} {us:>9.2f} {count * us:>9.1f}")
    print(f"{'total':<20} {'(no elementwise kernels: no table)':<40} {'':>5} {'':>9} {total:>9.1f}")


if __name__ == "__main__":
    main()
