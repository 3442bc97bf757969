#!/usr/bin/env python3
"""The transfer experiment: how well a chip's calibrated efficiencies predict another chip's
measured kernels, per transfer rule (`servesim calibrate --transfer`, calibrate/README.md).

    scripts/transfer_experiment.py ROOT SOURCE:TARGET... [--engine trtllm] [--rules fractions,bandwidth,time-scaled]

ROOT holds aiconfigurator/csv/data/<system>/<family>/<engine>/<version>/ (AIConfigurator's tables
as gzip CSV; not in this repository). SOURCE is a profile (a shipped name or a path) calibrated on
one chip; TARGET a chip preset with tables under ROOT (h100-sxm, h200-sxm, b200, b300, gb200,
gb300). For each pair and rule the source's efficiencies are transferred to the target (nothing of
the target fitted; its tables dropped) and checked against the target's own GEMM, attention and
MoE tables. Prints a Markdown table: median / p90 absolute percentage error per operator class
over all sizes. SERVESIM (default build/servesim) may be set. Each check takes a few seconds of
one core.
"""
import argparse
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

SYSTEMS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm", "b200": "b200_sxm", "b300": "b300_sxm",
           "gb200": "gb200", "gb300": "gb300"}
TABLES = ["gemm/gemm_perf", "attention/context_attention_perf", "attention/generation_attention_perf",
          "moe/moe_perf"]
# The operator classes reported: (cell kind, cell format) over all sizes.
CLASSES = [("gemm", "bf16"), ("gemm", "fp8"), ("gemm", "fp8_block"), ("gemm", "nvfp4"),
           ("attention_prefill", "bf16"), ("attention_decode", "bf16"), ("moe", "bf16 balanced"),
           ("moe", "fp8 balanced"), ("moe", "nvfp4 balanced"), ("moe", "w4a8_mxfp4_mxfp8 balanced")]


def version_key(path):
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", path)]


def tables_of(root, chip, engine):
    data = os.path.join(root, "aiconfigurator", "csv", "data", SYSTEMS[chip])
    out = []
    for t in TABLES:
        family, name = t.split("/")
        found = sorted(glob.glob(os.path.join(data, family, engine, "*", name + ".csv.gz")), key=version_key)
        if family == "moe":
            # The newest MoE table holding the formats the classes compare (TensorRT-LLM 1.3.0rc23
            # on Blackwell holds DeepSeek-V4's MXFP4 x MXFP8 experts only), as
            # scripts/calibrate_aiconfigurator.sh picks it.
            found = [f for f in found if has_moe_formats(f)]
        if found:
            out.append(found[-1])
    return out


def has_moe_formats(path):
    with gzip.open(path, "rt") as f:
        header = f.readline().rstrip("\n").split(",")
        col = header.index("moe_dtype") if "moe_dtype" in header else -1
        if col < 0:
            return False
        for line in f:
            if line.split(",")[col] in ("bfloat16", "fp8", "fp8_block", "nvfp4"):
                return True
    return False


def check(servesim, source, target, rule, tables, scratch):
    out = os.path.join(scratch, "transferred.yaml")
    js = os.path.join(scratch, "errors.json")
    cmd = [servesim, "calibrate", "--transfer", source, "--chip", target, "--transfer-rule", rule, "--out", out,
           "--created", "2026-12-04", "--json", js] + tables
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    with open(js) as f:
        cells = json.load(f)["cells"]
    return {(c["kind"], c["format"]): c for c in cells if c["size"] == "all"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("pairs", nargs="+", metavar="SOURCE:TARGET")
    ap.add_argument("--engine", default="trtllm")
    ap.add_argument("--rules", default="fractions,bandwidth,time-scaled")
    a = ap.parse_args()
    servesim = os.path.realpath(os.environ.get("SERVESIM", "build/servesim"))
    rules = a.rules.split(",")
    header = "| source -> target | rule | " + " | ".join(f"{k} {f}" for k, f in CLASSES) + " |"
    print(header)
    print("|" + "---|" * (2 + len(CLASSES)))
    with tempfile.TemporaryDirectory() as scratch:
        for pair in a.pairs:
            source, target = pair.split(":")
            if target not in SYSTEMS:
                sys.exit(f"unknown target '{target}' ({', '.join(SYSTEMS)})")
            tables = tables_of(a.root, target, a.engine)
            if not tables:
                sys.exit(f"no {a.engine} tables of {target} under {a.root}")
            for rule in rules:
                cells = check(servesim, source, target, rule, tables, scratch)
                row = []
                for k in CLASSES:
                    c = cells.get(k)
                    row.append("-" if c is None else f"{100 * c['ape_p50']:.1f} / {100 * c['ape_p90']:.1f}")
                label = os.path.basename(source).removesuffix(".yaml")
                print(f"| {label} -> {target} | {rule} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
