"""python/servesim_client.py driving `servesim serve`: 100 hypotheses over two processes, every
answer valid against the shipped JSON Schema (schemas/serve.schema.json, which `servesim schema`
must print byte for byte), answers in the order of the hypotheses and independent of the process
count, verdicts against constraints, and errors with their codes and allowed values.

Run by ctest (test `python_client`) from the repository root with SERVESIM_BIN set.
"""

import json
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import jsonschema  # Debian: python3-jsonschema (scripts/install_deps.sh)

from servesim_client import Servesim, run_hypotheses

BIN = os.environ.get("SERVESIM_BIN", os.path.join(ROOT, "build", "servesim"))
SCENARIO = "scenarios/quickstart.yaml"


def load_schema():
    with open(os.path.join(ROOT, "schemas", "serve.schema.json"), encoding="utf-8") as f:
        return json.load(f)


def validator(schema, definition):
    """A validator of one of the schema's definitions (the schema's $defs travel with it)."""
    sub = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/" + definition}
    jsonschema.Draft202012Validator.check_schema(sub)
    return jsonschema.Draft202012Validator(sub)


def hundred():
    """100 hypotheses: rates 8-40 /s x instances 1-4 x seeds, some with constraints, some bad."""
    out = []
    for i in range(100):
        h = {"scenario": SCENARIO,
             "set": {"workload.arrivals.rate": "%d /s" % (8 + 8 * (i % 5)),
                     "deployment.pools[0].instances": 1 + (i // 5) % 4,
                     "workload.requests": 60},
             "seed": i // 20}
        if i % 10 == 3:
            h["constraints"] = ["ttft_p99 <= 2 s", "tpot <= 80 ms"]
        if i % 25 == 7:
            h["set"]["deployment.pools[0].scheduler.policy"] = "fastest"  # not a policy
        out.append(h)
    return out


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.schema = load_schema()
        cls.requests = validator(cls.schema, "request")
        cls.answers = validator(cls.schema, "answer")
        cls.hypotheses = hundred()
        with Servesim(BIN, processes=2, cwd=ROOT) as sim:
            cls.results = sim.run(cls.hypotheses)

    def test_schema_is_printed_by_the_binary(self):
        printed = subprocess.run([BIN, "schema"], capture_output=True, text=True, check=True).stdout
        with open(os.path.join(ROOT, "schemas", "serve.schema.json"), encoding="utf-8") as f:
            self.assertEqual(printed, f.read())
        jsonschema.Draft202012Validator.check_schema(self.schema)

    def test_hundred_answers_in_order_and_valid(self):
        self.assertEqual(len(self.results), 100)
        for i, (h, a) in enumerate(zip(self.hypotheses, self.results)):
            self.requests.validate(dict(h, id=i))
            self.answers.validate(a)
            self.assertEqual(a["id"], i)
        ok = [a for a in self.results if a["ok"]]
        bad = [a for a in self.results if not a["ok"]]
        self.assertEqual(len(bad), 4)  # i % 25 == 7: 7, 32, 57, 82
        self.assertEqual(len(ok), 96)
        for a in ok:
            self.assertEqual(a["summary"]["requests"]["arrived"], 60)

    def test_bad_value_has_its_code_and_the_allowed_choices(self):
        a = self.results[7]
        self.assertFalse(a["ok"])
        e = a["errors"][0]
        self.assertEqual(e["code"], "bad_value")
        self.assertEqual(e["path"], "deployment.pools[0].scheduler.policy")
        self.assertEqual(e["allowed"]["choices"], ["sarathi", "whole_prompt"])
        self.assertTrue(e["file"].startswith("--set #"))

    def test_verdicts_check_the_constraints_and_the_scenario_slo(self):
        for i in range(3, 100, 10):
            a = self.results[i]
            if not a["ok"]:
                continue
            v = a["verdict"]
            names = [c["constraint"] for c in v["checks"]]
            # The per-request target 'tpot <= 80 ms' sets slo.tpot; the scenario's SLO is judged by
            # its attainment (99% by default), then the percentile constraint.
            self.assertEqual(names, ["slo_attainment >= 99%", "ttft_p99 <= 2 s"])
            att = a["summary"]["slo"]["attainment"]
            self.assertEqual(v["checks"][0]["value"], att)
            self.assertEqual(v["checks"][0]["holds"], att >= 0.99)
            p99 = a["summary"]["ttft_ms"]["p99"]
            self.assertEqual(v["checks"][1]["holds"], p99 <= 2000)
            self.assertEqual(v["feasible"], att >= 0.99 and p99 <= 2000)
            self.assertEqual(len(v["violations"]), [c["holds"] for c in v["checks"]].count(False))

    def test_answers_do_not_depend_on_the_process_count(self):
        some = self.hypotheses[:12]
        one = run_hypotheses(some, BIN, processes=1, cwd=ROOT)
        three = run_hypotheses(some, BIN, processes=3, cwd=ROOT)
        self.assertEqual(one, three)
        self.assertEqual(one, self.results[:12])

    def test_a_hypothesis_asked_again_goes_to_the_process_that_answered_it(self):
        # Asked again in another order, each hypothesis goes back to the process that had it,
        # which answers from its first run: the same answers, the same process per hypothesis
        # whatever the order, and new ones still spread over both processes. A percentile
        # constraint added is a verdict only (a per-request target like 'tpot <= 80 ms' would set
        # the SLO, another run); hypothesis 3 keeps its own.
        some = self.hypotheses[:10]
        with Servesim(BIN, processes=2, cwd=ROOT) as sim:
            first = sim.run(some)
            home = dict(sim._home)
            again = [dict(h, id=i) if "constraints" in h else dict(h, id=i, constraints=["ttft_p99 <= 100 s"])
                     for i, h in enumerate(some)][::-1]
            second = sim.run(again)[::-1]
            self.assertEqual(sim._home, home)
            self.assertEqual(sorted(set(home.values())), [0, 1])
        self.assertEqual(first[3], second[3])
        for a, b in zip(first, second):
            self.assertEqual(a["ok"], b["ok"])
            if a["ok"]:
                self.assertEqual(a["summary"], b["summary"])
                self.assertEqual(a["simulation"], b["simulation"])

    def test_protocol_errors_have_codes(self):
        lines = [
            "not json",
            json.dumps({"scenario": SCENARIO, "sett": {}}),
            json.dumps({"set": {}}),
            json.dumps({"scenario": "missing.yaml"}),
            json.dumps({"scenario": SCENARIO, "set": {"deployment.pools[0].scheduler.policyy": "sarathi"}}),
            json.dumps({"scenario": SCENARIO, "constraints": ["ttft_p99 <= 2"]}),
            json.dumps({"scenario": SCENARIO, "limits": {"events": 1}}),
            json.dumps({"scenario": SCENARIO, "set": {"deployment.pools[0].parallel.tp": 3}}),
        ]
        done = subprocess.run([BIN, "serve"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                              cwd=ROOT, check=True)
        answers = [json.loads(l) for l in done.stdout.splitlines()]
        codes = [a["errors"][0]["code"] for a in answers]
        self.assertEqual(codes, ["bad_json", "unknown_field", "missing_field", "scenario_unreadable",
                                 "unknown_key", "bad_constraint", "limit_exceeded", "invalid_scenario"])
        for a in answers:
            self.answers.validate(a)
        self.assertIn("policy", answers[4]["errors"][0]["allowed"]["keys"])


if __name__ == "__main__":
    unittest.main()
