"""A client for `servesim serve`, the simulator's JSON-lines protocol (standard library only).

    from servesim_client import Servesim

    with Servesim("build/servesim", processes=4) as sim:
        answers = sim.run([
            {"scenario": "scenarios/quickstart.yaml", "set": {"workload.arrivals.rate": "40 /s"}},
            {"scenario": "scenarios/quickstart.yaml", "set": {"deployment.pools[0].instances": 4},
             "constraints": ["ttft_p99 <= 2 s"]},
        ])
    for a in answers:
        print(a["ok"], a["summary"]["ttft_ms"]["p99"] if a["ok"] else a["errors"][0]["code"])

Each hypothesis is a dict as `servesim schema` describes a request (scenario, set, seed,
constraints, attainment, limits; an "id" is added when missing: its index). `run` sends them to
`processes` long-lived `servesim serve` processes (each answers its lines in order, so answers are
matched by position), waits for every answer and returns them as dicts in the order of the
hypotheses. A hypothesis goes to the process that had it before (same scenario, set, seed, limits
and early_stop), which answers it from its first run without simulating again; the others go to
the process given the fewest lines so far in the call (round robin when every one is new). A
hypothesis the simulator refuses is an answer with "ok": False and "errors" (each with a
machine-readable "code"), never an exception; the processes live until close().
Results do not depend on `processes`: each hypothesis is simulated on its own with its own seed.
"""

import json
import os
import subprocess
import threading

__all__ = ["Servesim", "ServesimError", "run_hypotheses"]


class ServesimError(RuntimeError):
    """A `servesim serve` process ended or answered out of protocol."""


class _Server:
    """One `servesim serve` process: lines in, one answer line each, in order."""

    def __init__(self, binary, cwd):
        self.proc = subprocess.Popen(
            [binary, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cwd, text=True, encoding="utf-8", bufsize=1)

    def answer_all(self, lines):
        """Sends every line and reads as many answers (a writer thread keeps both pipes moving)."""
        error = []

        def write():
            try:
                for line in lines:
                    self.proc.stdin.write(line + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError) as e:  # the process died; the reader says so
                error.append(e)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        answers = []
        for _ in lines:
            text = self.proc.stdout.readline()
            if not text:
                stderr = self.proc.stderr.read() if self.proc.poll() is not None else ""
                raise ServesimError("servesim serve ended after %d of %d answers%s" %
                                    (len(answers), len(lines), (": " + stderr.strip()) if stderr else ""))
            try:
                answers.append(json.loads(text))
            except json.JSONDecodeError as e:
                raise ServesimError("servesim serve answered a line that is not JSON: %r (%s)" % (text[:200], e))
        writer.join()
        return answers

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


class Servesim:
    """A pool of `servesim serve` processes. Use as a context manager, or call close()."""

    def __init__(self, binary="servesim", processes=None, cwd=None):
        self.binary = binary
        self.cwd = cwd
        self.processes = max(1, processes or os.cpu_count() or 1)
        self._servers = []
        self._home = {}  # what a serve process remembers a result by -> that process's index

    def _start(self, n):
        while len(self._servers) < n:
            self._servers.append(_Server(self.binary, self.cwd))

    def run(self, hypotheses):
        """Answers for every hypothesis (a list of dicts), in their order."""
        hypotheses = list(hypotheses)
        if not hypotheses:
            return []
        lines = []
        for i, h in enumerate(hypotheses):
            if not isinstance(h, dict):
                raise TypeError("hypothesis %d is a %s, not a dict" % (i, type(h).__name__))
            if "id" not in h:
                h = dict(h, id=i)
            lines.append(json.dumps(h))
        n = min(self.processes, len(lines))
        self._start(n)
        shares = [[] for _ in range(n)]
        for i, h in enumerate(hypotheses):
            # The fields serve's result memo keys on (studies/serve.h, ResultMemo), in their order.
            key = json.dumps([h.get(k) for k in ("scenario", "set", "seed", "limits", "early_stop")])
            k = self._home.get(key)
            if k is None or k >= n:
                k = min(range(n), key=lambda j: len(shares[j]))
                self._home[key] = k
            shares[k].append(i)
        results = [None] * len(lines)
        failures = []

        def drive(k):
            try:
                answers = self._servers[k].answer_all([lines[i] for i in shares[k]])
                for i, a in zip(shares[k], answers):
                    results[i] = a
            except Exception as e:  # reported below, after every process is done
                failures.append(e)

        threads = [threading.Thread(target=drive, args=(k,), daemon=True) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures:
            raise failures[0]
        return results

    def close(self):
        for s in self._servers:
            s.close()
        self._servers = []
        self._home = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def run_hypotheses(hypotheses, binary="servesim", processes=None, cwd=None):
    """One call: start the processes, answer every hypothesis, stop them."""
    with Servesim(binary, processes, cwd) as sim:
        return sim.run(hypotheses)
