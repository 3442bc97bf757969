#!/usr/bin/env python3
"""Context attention against two rooflines, on TensorRT-LLM's measured kernels of six chips.

    scripts/attention_softmax_check.py ROOT [--min-ms 0.5]

ROOT holds aiconfigurator/csv/data/<system>/attention/trtllm/<version>/context_attention_perf.csv.gz
(AIConfigurator's tables; not in this repository). For every chip the newest version's full
attention rows (no window) in bf16 with a bf16 KV cache, slower than --min-ms (the compute-bound
end, where fixed costs are small), are compared with

- one term: t = F / (P e), F = 4 d x (causal query-key pairs x heads), P the chip's dense bf16 peak;
- two terms: t = F / (P e1) + X / E, X the softmax exponentials (one per causal pair and head),
  E the chip's exponential rate: SMs x clock x the special function units' exp2 results per clock
  and SM (16 on Hopper and Blackwell, 32 on Blackwell Ultra: NVIDIA, "Making Softmax More
  Efficient with NVIDIA Blackwell Ultra", which doubles the SFU throughput of Blackwell), taken
  as P x (exp2 per clock) / (dense bf16 FLOPs per clock and SM: 4,096 on Hopper, 8,192 on
  Blackwell), since the datasheets quote P at the same clock.

It prints each chip's fitted efficiencies (medians of the rows' own; and the two-term form's
least-squares pair e1, e2 with E / e2), then how a chip's fitted efficiency predicts another
chip's rows (median / p90 absolute and median signed error, per head dim; the two-term form
with e2 = 1 and with the source's least-squares pair): the transfer to a chip
without measurements that calibrate/README.md measures for the shipped rules.
"""
import argparse
import glob
import gzip
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transfer_experiment import version_key  # noqa: E402  (the newest version, as the other scripts pick it)

# Dense bf16 peak (models/chip_spec.cpp), exp2 results per clock and SM / dense bf16 FLOPs per
# clock and SM.
CHIPS = {"h100_sxm": (989.5e12, 16 / 4096), "h200_sxm": (989.5e12, 16 / 4096),
         "b200_sxm": (2.25e15, 16 / 8192), "gb200": (2.5e15, 16 / 8192),
         "b300_sxm": (2.25e15, 32 / 8192), "gb300": (2.5e15, 32 / 8192)}
PAIRS = [("h100_sxm", "h200_sxm"), ("h200_sxm", "b200_sxm"), ("h200_sxm", "gb200"), ("h200_sxm", "b300_sxm"),
         ("h200_sxm", "gb300"), ("b200_sxm", "b300_sxm"), ("b300_sxm", "b200_sxm"), ("b200_sxm", "gb300")]


def rows_of(root, system, min_s):
    found = sorted(glob.glob(os.path.join(root, "aiconfigurator", "csv", "data", system, "attention", "trtllm", "*",
                                          "context_attention_perf.csv.gz")), key=version_key)
    if not found:
        raise SystemExit(f"no TensorRT-LLM context attention table of {system} under {root}")
    out = []
    with gzip.open(found[-1], "rt") as f:
        col = {k: i for i, k in enumerate(f.readline().strip().split(","))}
        for line in f:
            r = line.strip().split(",")
            if r[col["window_size"]] != "0" or r[col["attn_dtype"]] != "bfloat16":
                continue
            if r[col["kv_cache_dtype"]] != "bfloat16":
                continue
            t = float(r[col["latency"]]) * 1e-3
            if t < min_s:
                continue
            b, s = int(r[col["batch_size"]]), int(r[col["isl"]])
            heads, d = int(r[col["num_heads"]]), int(r[col["head_dim"]])
            exps = b * heads * s * (s + 1) / 2
            out.append({"d": d, "t": t, "exps": exps, "flops": 4 * d * exps})
    return out


def predicted(r, chip, e1, e2=None):
    # F / (P e1), plus X / (E e2) with the exponential term (e2 given).
    peak, ratio = CHIPS[chip]
    return r["flops"] / (peak * e1) + (r["exps"] / (peak * ratio * e2) if e2 else 0.0)


def one_term(chip, rows):
    peak, _ = CHIPS[chip]
    return statistics.median(r["flops"] / (peak * r["t"]) for r in rows)


def two_term(chip, rows):
    # Each row's tensor efficiency once its exponentials (at the chip's rate) are taken off.
    peak, ratio = CHIPS[chip]
    left = [(r, r["t"] - r["exps"] / (peak * ratio)) for r in rows]
    return statistics.median(r["flops"] / (peak * t) for r, t in left if t > 0)


def least_squares(chip, rows):
    # Relative residuals: minimise sum (a u + c v - 1)^2, u = F / (P t), v = X / (E t).
    peak, ratio = CHIPS[chip]
    u = [r["flops"] / (peak * r["t"]) for r in rows]
    v = [r["exps"] / (peak * ratio * r["t"]) for r in rows]
    suu, svv = sum(x * x for x in u), sum(x * x for x in v)
    suv, su, sv = sum(x * y for x, y in zip(u, v)), sum(u), sum(v)
    det = suu * svv - suv * suv
    return det / (su * svv - sv * suv), det / (sv * suu - su * suv)


def summary(errors):
    a = sorted(abs(e) for e in errors)
    return f"{100 * statistics.median(a):.1f} / {100 * a[int(0.9 * (len(a) - 1))]:.1f} / {100 * statistics.median(errors):+.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--min-ms", type=float, default=0.5)
    a = ap.parse_args()
    data = {c: rows_of(a.root, c, a.min_ms * 1e-3) for c in CHIPS}
    print("| chip | rows | one term: e | two terms: e1 | least squares: e1, e2 |")
    print("|---|---:|---:|---:|---|")
    for c, rows in data.items():
        e1, e2 = least_squares(c, rows)
        print(f"| {c} | {len(rows)} | {one_term(c, rows):.3f} | {two_term(c, rows):.3f} | {e1:.3f}, {e2:.3f} |")
    print()
    print("| source -> target | head dim | rows | one term: median / p90 / signed % | two terms | two terms, least squares |")
    print("|---|---|---:|---|---|---|")
    for src, dst in PAIRS:
        e, e1 = one_term(src, data[src]), two_term(src, data[src])
        l1, l2 = least_squares(src, data[src])
        for d in (None, 64, 128):
            rows = [r for r in data[dst] if d is None or r["d"] == d]
            if not rows:
                continue
            one = [predicted(r, dst, e) / r["t"] - 1 for r in rows]
            two = [predicted(r, dst, e1, 1.0) / r["t"] - 1 for r in rows]
            ls = [predicted(r, dst, l1, l2) / r["t"] - 1 for r in rows]
            print(f"| {src} -> {dst} | {'all' if d is None else d} | {len(rows)} | {summary(one)} | {summary(two)} | "
                  f"{summary(ls)} |")


if __name__ == "__main__":
    main()
