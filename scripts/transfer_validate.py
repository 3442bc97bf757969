#!/usr/bin/env python3
"""The transfer experiment end to end: what `servesim validate` predicts for measured serving
benchmarks when a chip's kernels were never measured (calibrate/README.md, "Transfer ... end to
end").

    scripts/transfer_validate.py [MEASURED.csv] [--threads N] [--rounds N]

For each case below, profiles are made with `servesim calibrate --transfer SOURCE --chip TARGET`
(rule fractions, the default; the source profile of the row's engine) into a scratch folder,
and the file is validated with `--profile TARGET/ENGINE=that profile` for every target chip of the
case: the rows of the other chips keep their own profiles. Cases:

    own        every chip its shipped profile (what `validate` reports)
    none       every chip its preset's assumed efficiencies (`--profile CHIP=none`)
    hopper     H100 from H200's profiles and H200 from H100's
    blackwell  B200 and GB200 from B300's
    h200->bw   B200 and GB200 from H200's (across a generation: the domestic case)
    engine     every chip's SGLang and vLLM rows from its TensorRT-LLM profile (an engine whose
               kernels were not measured; nothing transferred: the same chip)

Prints a Markdown table: per (model, system, mode, backend) group the median APE of TTFT and TPOT
under each case, then the overall figures. MEASURED.csv defaults to the shipped dev set. SERVESIM
(default build/servesim) may be set. About a minute per case on two cores.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ENGINES = ["trtllm", "sglang", "vllm"]
# case -> [(target chip preset, source chip's profile stem)]
CASES = {
    "own": [],
    "none": None,
    "hopper": [("h100-sxm", "h200"), ("h200-sxm", "h100")],
    "blackwell": [("b200", "b300"), ("gb200", "b300")],
    "h200->bw": [("b200", "h200"), ("gb200", "h200")],
    "engine": "engine",
}
# chip preset -> its TensorRT-LLM profile (the `engine` case)
TRTLLM = {"h100-sxm": "h100", "h200-sxm": "h200", "b200": "b200", "gb200": "gb200", "b300": "b300", "gb300": "gb300"}
NONE_CHIPS = ["h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300"]


def shipped_profiles(binary):
    """The shipped profile names, from the error validate gives for a profile that is not one."""
    out = subprocess.run([binary, "validate", os.devnull, "--profile", "b200=/nonexistent/x.yaml"],
                         capture_output=True, text=True).stderr
    start = out.find("shipped profile (")
    if start < 0:
        sys.exit("cannot list the shipped profiles: " + out)
    names = out[start + len("shipped profile ("):out.find(")", start)]
    return {n.strip() for n in names.split(",")}


def profile_args(binary, case, scratch, shipped):
    if CASES[case] is None:
        return [arg for chip in NONE_CHIPS for arg in ("--profile", chip + "=none")]
    if CASES[case] == "engine":
        return [arg for chip, stem in TRTLLM.items() for engine in ENGINES[1:]
                for arg in ("--profile", "%s/%s=%s" % (chip, engine, stem))]
    args = []
    for target, stem in CASES[case]:
        for engine in ENGINES:
            source = stem if engine == "trtllm" else stem + "-" + engine
            if source not in shipped:
                continue
            out = os.path.join(scratch, "%s-from-%s.yaml" % (target, source))
            subprocess.run([binary, "calibrate", "--transfer", source, "--chip", target, "--out", out],
                           check=True, capture_output=True)
            args += ["--profile", "%s/%s=%s" % (target, engine, out)]
    return args


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("measured", nargs="?",
                        default=os.path.join(here, "..", "calibrate", "data", "serving", "silicon_dev.csv"))
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cases", default=",".join(CASES))
    a = parser.parse_args()
    binary = os.environ.get("SERVESIM", os.path.join(here, "..", "build", "servesim"))
    cases = a.cases.split(",")
    for c in cases:
        if c not in CASES:
            sys.exit("unknown case '%s' (%s)" % (c, ", ".join(CASES)))
    shipped = shipped_profiles(binary)
    reports = {}
    with tempfile.TemporaryDirectory() as scratch:
        for case in cases:
            cmd = [binary, "validate", a.measured, "--json", "-", "--reproducible", "--threads", str(a.threads),
                   "--rounds", str(a.rounds)] + profile_args(binary, case, scratch, shipped)
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit("%s: %s" % (" ".join(cmd), run.stderr))
            reports[case] = json.loads(run.stdout)
            print("case %s: %d of %d rows simulated" % (case, reports[case]["overall"]["predicted"],
                                                          reports[case]["overall"]["rows"]), file=sys.stderr)

    def cell(g):
        return "%.1f / %.1f%%" % (100 * g["ttft_ape_p50"], 100 * g["tpot_ape_p50"])

    print("| group | rows | " + " | ".join(cases) + " |")
    print("|---|---:|" + "---|" * len(cases))
    first = reports[cases[0]]
    for i, g in enumerate(first["backends"]):
        name = "%s %s %s %s" % (g["model"], g["system"], g["mode"], g["backend"])
        cells = [cell(reports[c]["backends"][i]) for c in cases]
        print("| %s | %d | %s |" % (name, g["rows"], " | ".join(cells)))
    print("| **overall** | %d | %s |" % (first["overall"]["rows"],
                                        " | ".join(cell(reports[c]["overall"]) for c in cases)))
    print("\nTTFT / TPOT median APE; signed means (TTFT / TPOT) overall: " +
          ", ".join("%s %+.1f / %+.1f%%" % (c, 100 * reports[c]["overall"]["ttft_signed_mean"],
                                            100 * reports[c]["overall"]["tpot_signed_mean"]) for c in cases))


if __name__ == "__main__":
    main()
