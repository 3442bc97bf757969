#!/usr/bin/env python3
"""Derive roofline efficiency factors for servesim from Vidur profiling data.

Usage: python3 scripts/derive_efficiency.py <vidur-data-root> [--models M ...]

<vidur-data-root> holds data/profiling/... and history/e2d00e9/... (a copy of
microsoft/vidur's data files). Prints markdown. Standard library only.

Conventions (see derive_efficiency.md for the discussion):
  * All Vidur timings are milliseconds, GPU kernel time only (PyTorch
    profiler / Kineto), so CPU launch overhead is NOT included.
  * Vidur profiled fp16 weights/activations: 2 bytes per element; fp16 and
    bf16 dense tensor-core peaks are identical on these chips.
  * roofline = max(FLOPs / peak_flops, bytes / peak_bw); efficiency =
    roofline / measured median.  "compute-bound" means FLOPs/peak >= bytes/bw.
"""
import argparse
import csv
import math
import os
import statistics

PEAK = {  # dense fp16/bf16 FLOP/s, HBM B/s
    "a100": (312e12, 2039e9),
    "h100": (989.5e12, 3350e9),
    "a40": (149.7e12, 696e9),
}
NVLINK = {"a100_dgx": 300e9, "h100_dgx": 450e9}  # per direction per GPU
BINS = [(1, 16), (17, 128), (129, 512), (513, 2048), (2049, 10**9)]
BIN_NAMES = ["1-16", "17-128", "129-512", "513-2048", "2049+"]
GEMMS = ["attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"]
ELEMWISE = ["input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add"]
MIB = 1 << 20


def bin_of(t):
    for i, (lo, hi) in enumerate(BINS):
        if lo <= t <= hi:
            return i
    raise ValueError(t)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def quart(xs):
    if len(xs) < 2:
        return (xs[0], xs[0]) if xs else (float("nan"),) * 2
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def summ(xs, nd=2):
    """'median [p25-p75] (n)' or '-'."""
    if not xs:
        return "-"
    lo, hi = quart(xs)
    return f"{med(xs):.{nd}f} [{lo:.{nd}f}-{hi:.{nd}f}] ({len(xs)})"


def linfit(xs, ys):
    """Closed-form OLS y = a + b*x. Returns (a, b, r2)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    b = sxy / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    return a, b, (1 - ss_res / ss_tot) if ss_tot > 0 else float("nan")


def fnum(v):
    return float(v) if v not in ("", None) else None


# ----------------------------------------------------------------- compute ---
def load_mlp(path):
    """Return (shape dict, {(tp, tokens): {op: median_ms}}); duplicate
    (tp, tokens) rows, which Vidur's table contains, are reduced by median."""
    acc, shape = {}, None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if shape is None:
                shape = dict(
                    q_heads=int(row["n_head"]), kv_heads=int(row["n_kv_head"]),
                    hidden=int(row["n_embd"]), ffn=int(row["n_expanded_embd"]),
                    gated=row["use_gated_mlp"].strip().lower() == "true")
            key = (int(row["num_tensor_parallel_workers"]), int(row["num_tokens"]))
            d = acc.setdefault(key, {})
            for col, v in row.items():
                if col.startswith("time_stats.") and col.endswith(".median"):
                    x = fnum(v)
                    if x is not None and not math.isnan(x):
                        d.setdefault(col.split(".")[1], []).append(x)
    return shape, {k: {op: med(v) for op, v in d.items()} for k, d in acc.items()}


def gemm_kn(op, s, tp):
    hd = s["hidden"] // s["q_heads"]
    h = s["hidden"]
    if op == "attn_pre_proj":
        return h, (s["q_heads"] + 2 * s["kv_heads"]) * hd // tp
    if op == "attn_post_proj":
        return s["q_heads"] * hd // tp, h
    if op == "mlp_up_proj":
        return h, (2 if s["gated"] else 1) * s["ffn"] // tp
    if op == "mlp_down_proj":
        return s["ffn"] // tp, h
    raise KeyError(op)


def gemm_points(shape, table, sku):
    """Yield (op, tp, tokens, bound, eff, roofline_s, measured_s, t_compute_s, t_mem_s)."""
    pf, bw = PEAK[sku]
    for (tp, t), ops in sorted(table.items()):
        for op in GEMMS:
            if op not in ops or ops[op] <= 0:
                continue
            k, n = gemm_kn(op, shape, tp)
            tc = 2.0 * t * k * n / pf
            tm = 2.0 * (k * n + t * k + t * n) / bw
            meas = ops[op] * 1e-3
            yield (op, tp, t, ("comp" if tc >= tm else "mem"), max(tc, tm) / meas, max(tc, tm),
                   meas, tc, tm)


def elem_bytes(op, s, tp, t):
    """Minimal HBM traffic (bytes) of the elementwise op, fp16 activations."""
    h, hd = s["hidden"], s["hidden"] // s["q_heads"]
    if op in ("input_layernorm", "post_attention_layernorm"):
        return 2 * (2 * t * h + h)                     # read x, write y, weight
    if op == "add":
        return 2 * 3 * t * h                           # a + b -> c
    if op == "mlp_act":                                # SiluAndMul: 2f in, f out
        return 2 * 3 * t * s["ffn"] // tp
    if op == "attn_rope":                              # in-place q,k + cos/sin
        return 2 * (2 * t * (s["q_heads"] + s["kv_heads"]) * hd // tp + t * hd)
    raise KeyError(op)


def compute_section(root, models):
    base = os.path.join(root, "data", "profiling", "compute")
    print("## 1. GEMM efficiency (roofline / measured median)\n")
    print("Cells: median [p25-p75] (n points). mem = memory-bound points, comp = "
          "compute-bound points (FLOPs/peak >= bytes/BW). Pooled over models and TP.\n")
    detail, elem, fits, allpts = [], [], [], {}
    for sku in sorted(os.listdir(base)):
        if sku not in PEAK:
            continue
        files = []
        for org in sorted(os.listdir(os.path.join(base, sku))):
            for m in sorted(os.listdir(os.path.join(base, sku, org))):
                p = os.path.join(base, sku, org, m, "mlp.csv")
                if os.path.exists(p) and (not models or m in models):
                    files.append((m, p))
        if not files:
            continue
        pooled = {}   # (op, bound, bin) -> [eff]
        fitpts = {"mem, tokens<=128": ([], []), "comp, tokens>=2049": ([], [])}
        for m, p in files:
            shape, table = load_mlp(p)
            rows = {}
            for op, tp, t, bound, eff, roof, meas, tc, tm in gemm_points(shape, table, sku):
                b = bin_of(t)
                allpts.setdefault(sku, []).append((t, tc, tm, meas))
                pooled.setdefault((op, bound, b), []).append(eff)
                rows.setdefault((op, tp), {}).setdefault((bound, b), []).append(eff)
                if bound == "mem" and t <= 128:
                    fitpts["mem, tokens<=128"][0].append(roof)
                    fitpts["mem, tokens<=128"][1].append(meas)
                if bound == "comp" and t >= 2049:
                    fitpts["comp, tokens>=2049"][0].append(roof)
                    fitpts["comp, tokens>=2049"][1].append(meas)
            detail.append((sku, m, shape, rows))
            if shape["gated"]:   # Llama-style block; phi-2 has a different add/norm path
                for (tp, t), ops in table.items():
                    for op in ELEMWISE:
                        if op in ops and ops[op] > 0:
                            frac = elem_bytes(op, shape, tp, t) / PEAK[sku][1] / (ops[op] * 1e-3)
                            elem.append((sku, m, op, tp, t, frac, ops[op]))
        print(f"### {sku} (peak {PEAK[sku][0]/1e12:g} TFLOP/s, {PEAK[sku][1]/1e9:g} GB/s; "
              f"ridge ~{PEAK[sku][0]/PEAK[sku][1]:.0f} tokens; models: "
              f"{', '.join(m for m, _ in files)})\n")
        print("| op | bound | " + " | ".join(BIN_NAMES) + " |")
        print("|---|---|" + "---|" * len(BINS))
        for op in GEMMS:
            for bound in ("mem", "comp"):
                cells = [summ(pooled.get((op, bound, b), [])) for b in range(len(BINS))]
                if any(c != "-" for c in cells):
                    print(f"| {op} | {bound} | " + " | ".join(cells) + " |")
        allb = lambda bound, bs: [e for (o, bd, b), v in pooled.items()
                                  if bd == bound and b in bs for e in v]
        print(f"| **all GEMMs** | mem | " + " | ".join(summ(allb("mem", [b])) for b in range(len(BINS))) + " |")
        print(f"| **all GEMMs** | comp | " + " | ".join(summ(allb("comp", [b])) for b in range(len(BINS))) + " |")
        print()
        for name, (xs, ys) in fitpts.items():
            if len(xs) > 2:
                a, b, r2 = linfit(xs, ys)
                fits.append((sku, name, a, b, r2, len(xs)))
    print("### GEMM two-parameter fit: measured = overhead + roofline / eff (OLS over all models/TP)\n")
    print("| sku | points | overhead (us) | eff = 1/slope | R^2 | n |")
    print("|---|---|---|---|---|---|")
    for sku, name, a, b, r2, n in fits:
        print(f"| {sku} | {name} | {a*1e6:.1f} | {1/b:.3f} | {r2:.3f} | {n} |")
    print("\nCheck of the combined model predicted = o + max(t_c/e_c, t_m/e_m), with o and e_m from "
          "the memory fit and e_c from the compute fit above: predicted/measured per token bin, "
          "median [p10-p90].\n")
    print("| sku | o (us) | e_m | e_c | " + " | ".join(BIN_NAMES) + " |")
    print("|---|---|---|---|" + "---|" * len(BINS))
    fd = {(f[0], f[1][:4]): f for f in fits}
    for sku, pts in allpts.items():
        o, em, ec = fd[(sku, "mem,")][2], 1 / fd[(sku, "mem,")][3], 1 / fd[(sku, "comp")][3]
        cells = []
        for b in range(len(BINS)):
            r = sorted((o + max(tc / ec, tm / em)) / ms for t, tc, tm, ms in pts if bin_of(t) == b)
            cells.append(f"{med(r):.2f} [{r[len(r)//10]:.2f}-{r[9*len(r)//10]:.2f}]" if r else "-")
        print(f"| {sku} | {o*1e6:.1f} | {em:.3f} | {ec:.3f} | " + " | ".join(cells) + " |")
    print()
    print("### GEMM detail per SKU / model / op / TP (median efficiency; m = memory-bound, c = compute-bound)\n")
    for sku, m, s, rows in detail:
        print(f"#### {sku} / {m} (hidden {s['hidden']}, q_heads {s['q_heads']}, kv_heads "
              f"{s['kv_heads']}, ffn {s['ffn']}, gated {s['gated']})\n")
        print("| op | tp | " + " | ".join(BIN_NAMES) + " |")
        print("|---|---|" + "---|" * len(BINS))
        for (op, tp), d in sorted(rows.items(), key=lambda kv: (GEMMS.index(kv[0][0]), kv[0][1])):
            cells = []
            for b in range(len(BINS)):
                parts = [f"{bd[0]}{med(d[(bd, b)]):.2f}" for bd in ("mem", "comp") if (bd, b) in d]
                cells.append(" ".join(parts) or "-")
            print(f"| {op} | {tp} | " + " | ".join(cells) + " |")
        print()
    return elem


def elementwise_section(elem):
    print("## 2. Elementwise ops: achieved HBM bandwidth / peak, and per-kernel floor\n")
    print("Bytes = minimal traffic (fp16): layernorm 4*t*h, add 6*t*h, mlp_act (SiluAndMul) "
          "6*t*ffn/tp, rope 4*t*(qh+kvh)*hd/tp + 2*t*hd. Llama-style (gated) models only. "
          "Fractions pooled over models and TP. floor = smallest measured median time "
          "(GPU kernel time; 1 us resolution) and median time at 1 token.\n")
    print("| sku | op | frac 513-2048 | frac 2049+ | frac at max tokens | floor min (us) | median @1 tok (us) |")
    print("|---|---|---|---|---|---|---|")
    by = {}
    for sku, m, op, tp, t, frac, ms in elem:
        by.setdefault((sku, op), []).append((t, frac, ms, m))
    floors = {}
    for (sku, op), pts in sorted(by.items()):
        mid = [f for t, f, _, _ in pts if 513 <= t <= 2048]
        big = [f for t, f, _, _ in pts if t >= 2049]
        tmax = {}
        for t, f, _, m in pts:
            tmax[m] = max(tmax.get(m, 0), t)
        atmax = [f for t, f, _, m in pts if t == tmax[m]]
        fl = min(ms for _, _, ms, _ in pts) * 1e3
        one = med([ms for t, _, ms, _ in pts if t == 1]) * 1e3
        floors.setdefault(sku, []).append(one)
        print(f"| {sku} | {op} | {summ(mid)} | {summ(big)} | {summ(atmax)} | {fl:.1f} | {one:.1f} |")
    print()
    for sku, v in sorted(floors.items()):
        print(f"- {sku}: median over elementwise ops of the 1-token time = {med(v):.1f} us")
    print()


# ----------------------------------------------------------------- network ---
def allreduce_section(root, nodes):
    print("## 3. All-reduce (intra-node: devices_per_node == num_workers)\n")
    print("Model: time = alpha + S * 2(n-1)/n / busbw. busbw from the OLS slope on sizes >= 1 MiB; "
          "alpha = median time of sizes <= 256 KiB (alpha_OLS = intercept of the same fit, for "
          "comparison). busbw_max = max of S*2(n-1)/n / time over the 8 largest sizes "
          "(no alpha subtracted). err = median and max |relative error| of alpha + fitted slope "
          "over all sizes >= 64 KiB. Times are NCCL kernel time (Kineto; median of 11 launches).\n")
    print("| node | n | alpha (us) small-size median [p25-p75] | alpha_OLS (us) | busbw fit (GB/s) "
          "| busbw/NVLink | R^2 | busbw_max (GB/s) | err med / max | max size (MiB) | points >= 1 MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for node in nodes:
        p = os.path.join(root, "data", "profiling", "network", node, "all_reduce.csv")
        if not os.path.exists(p):
            print(f"| {node} | missing | | | | | | | | |")
            continue
        grp = {}
        with open(p, newline="") as f:
            for row in csv.DictReader(f):
                n, dpn = int(row["num_workers"]), int(row["devices_per_node"])
                t = fnum(row["time_stats.all_reduce.median"])
                if n == dpn and n > 1 and t:
                    grp.setdefault(n, []).append((int(row["size"]), t * 1e-3))
        for n, pts in sorted(grp.items()):
            fac = 2.0 * (n - 1) / n
            big = [(s, t) for s, t in pts if s >= MIB]
            small = [t for s, t in pts if s <= 256 * 1024]
            a, b, r2 = linfit([s * fac for s, _ in big], [t for _, t in big])
            top = sorted(pts)[-8:]
            bmax = max(s * fac / t for s, t in top)
            lo, hi = quart(small)
            bw = 1 / b
            errs = [abs(med(small) + s * fac * b - t) / t for s, t in pts if s >= 64 * 1024]
            print(f"| {node} | {n} | {med(small)*1e6:.1f} [{lo*1e6:.0f}-{hi*1e6:.0f}] ({len(small)}) | "
                  f"{a*1e6:.1f} | {bw/1e9:.1f} | {bw/NVLINK.get(node, float('nan')):.2f} | {r2:.3f} | "
                  f"{bmax/1e9:.1f} | {med(errs):.2f} / {max(errs):.2f} | {max(s for s, _ in pts)/MIB:.0f} | {len(big)} |")
    print()


# --------------------------------------------------------------- attention ---
def attention_section(root):
    p = os.path.join(root, "history", "e2d00e9", "data", "profiling", "a100", "attention.csv")
    print("## 4. Attention (A100, Llama-2-70B shape, TP2, FlashAttention, block 16)\n")
    if not os.path.exists(p):
        print(f"attention table not found at {p}\n")
        return
    pf, bw = PEAK["a100"]
    pre, dec, shape = [], [], None
    with open(p, newline="") as f:
        for row in csv.DictReader(f):
            tp = int(row["num_tensor_parallel_workers"])
            qh, kvh = int(row["n_q_head"]) // tp, int(row["n_kv_head"]) // tp
            hd = int(row["n_embd"]) // int(row["n_q_head"])
            shape = (qh, kvh, hd, tp)
            B, T, C = int(row["batch_size"]), int(row["prefill_chunk_size"]), int(row["kv_cache_size"])
            if row["is_prefill"].strip() == "True":
                ms = fnum(row["time_stats.attn_prefill.median"])
                # causal: query i (0-based) of the chunk attends to C + i + 1 keys;
                # QK^T and PV each cost 2*hd FLOPs per (query, key, head).
                pairs = B * (T * C + T * (T + 1) / 2)
                flops = 4.0 * qh * hd * pairs
                rect = 4.0 * qh * hd * B * T * (C + T)   # if masked blocks were computed
                byts = 2.0 * B * (2 * T * qh * hd + 2 * (C + T) * kvh * hd)  # Q,O + K,V
                if ms:
                    sec = ms * 1e-3
                    pre.append((T, C, flops / pf / sec, byts / bw / sec, ms, rect / pf / sec))
            else:
                ms = fnum(row["time_stats.attn_decode.median"])
                byts = 2.0 * B * 2 * (C + 1) * kvh * hd   # K and V, fp16, per request
                if ms:
                    dec.append((B, C, byts, ms))
    qh, kvh, hd, tp = shape
    print(f"Per GPU: {qh} q heads, {kvh} kv heads, head_dim {hd} (TP{tp}).\n")
    print("**Prefill** (batch 1): T = prefill_chunk_size new tokens, C = kv_cache_size cached "
          "tokens. FLOPs = 4 * qh * hd * (T*C + T(T+1)/2) (causal; masked blocks not counted). "
          "Cell = median compute efficiency with causal FLOPs / with rectangular FLOPs "
          "4*qh*hd*T*(C+T), i.e. as if masked blocks were computed (n points).\n")
    tb = [(64, 256), (257, 1024), (1025, 2048), (2049, 4096)]
    cb = [(0, 0), (1, 1024), (1025, 2048), (2049, 4096)]
    print("| T \\ C | " + " | ".join(f"{lo}-{hi}" for lo, hi in cb) + " |")
    print("|---|" + "---|" * len(cb))
    for tlo, thi in tb:
        cells = []
        for clo, chi in cb:
            v = [(x[2], x[5]) for x in pre if tlo <= x[0] <= thi and clo <= x[1] <= chi]
            cells.append(f"{med([a for a, _ in v]):.3f} / {med([b for _, b in v]):.3f} ({len(v)})"
                         if v else "-")
        print(f"| {tlo}-{thi} | " + " | ".join(cells) + " |")
    top = sorted(pre, key=lambda x: -x[0] * (x[1] + x[0] / 2))[:20]
    long_ = [x for x in pre if x[4] >= 0.2]
    print(f"\nPrefill, 20 largest-FLOP points: compute eff {summ([x[2] for x in top], 3)}; "
          f"best point overall {max(x[2] for x in pre):.3f}; rectangular-FLOP eff of the 20 "
          f"{summ([x[5] for x in top], 3)}; all {len(long_)} points with time >= 0.2 ms: causal "
          f"{summ([x[2] for x in long_], 3)}, rectangular {summ([x[5] for x in long_], 3)}; memory-roofline fraction of those "
          f"20 points {summ([x[3] for x in top], 3)} (they are compute-bound).\n")
    print("**Decode**: B requests each reading C+1 cached tokens. bytes = B * 2(K,V) * (C+1) * "
          "kvh * hd * 2 B. Cell = median bandwidth efficiency (n).\n")
    bbins = [(1, 1), (2, 8), (9, 32), (33, 64), (65, 128)]
    kbins = [(32, 256), (257, 1024), (1025, 2048), (2049, 4096)]
    print("| batch \\ kv_len | " + " | ".join(f"{lo}-{hi}" for lo, hi in kbins) + " |")
    print("|---|" + "---|" * len(kbins))
    for blo, bhi in bbins:
        cells = []
        for klo, khi in kbins:
            v = [by / bw / (ms * 1e-3) for B, C, by, ms in dec if blo <= B <= bhi and klo <= C <= khi]
            cells.append(f"{med(v):.3f} ({len(v)})" if v else "-")
        print(f"| {blo}-{bhi} | " + " | ".join(cells) + " |")
    a, b, r2 = linfit([by / bw for _, _, by, _ in dec], [ms * 1e-3 for *_, ms in dec])
    big = [x for x in dec if x[2] >= 256 * MIB]
    a2, b2, r22 = linfit([by / bw for _, _, by, _ in big], [ms * 1e-3 for *_, ms in big])
    print(f"\nDecode fit measured = overhead + (bytes/peak_bw)/eff, all {len(dec)} points: "
          f"overhead {a*1e6:.1f} us, eff {1/b:.3f}, R^2 {r2:.3f}; points with >= 256 MiB of KV "
          f"({len(big)}): overhead {a2*1e6:.1f} us, eff {1/b2:.3f}, R^2 {r22:.3f}. Smallest decode "
          f"time {min(ms for *_, ms in dec)*1e3:.0f} us, smallest prefill time "
          f"{min(x[4] for x in pre)*1e3:.0f} us.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="Vidur data root (contains data/ and history/)")
    ap.add_argument("--models", nargs="*", default=None,
                    help="HF model directory names to include (default: all present)")
    ap.add_argument("--nodes", nargs="*", default=["a100_dgx", "h100_dgx"])
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.root, "data", "profiling")):
        ap.error(f"{args.root} has no data/profiling/ (pass the Vidur data root)")
    print(f"# servesim efficiency derivation from Vidur data\n")
    print(f"Generated by `python3 scripts/derive_efficiency.py <vidur-root>"
          f"{' --models ' + ' '.join(args.models) if args.models else ''}`.\n")
    elem = compute_section(args.root, set(args.models) if args.models else None)
    elementwise_section(elem)
    allreduce_section(args.root, args.nodes)
    attention_section(args.root)


if __name__ == "__main__":
    main()
