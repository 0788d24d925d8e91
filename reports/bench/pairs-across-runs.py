"""Every pair of rows of each workload in several bench.json runs: which is faster with 95%
confidence in each run (ranking.compare on the rows' block medians, with the run's cohorts), and
whether any pair is called one way in one run and the other way in another."""

import itertools
import json
import sys

from gpt2_conformance.bench import ranking

runs = [json.load(open(p)) for p in sys.argv[1:]]
calls = {}
for k, run in enumerate(runs):
    cohorts = run["gpt2_conformance_bench"].get("processes", 1)
    rows = {}
    for b in run["benchmarks"]:
        e = b["extra_info"]
        rows.setdefault(e["workload"], {})[f"{e['label']} {e['mode']}"] = e["block_medians"]
    for group, named in rows.items():
        for a, b in itertools.combinations(sorted(named), 2):
            r = ranking.compare(named[a], named[b], cohorts)
            verdict = "tie" if r is None or not (r.low > 1 or r.high < 1) else (">" if r.low > 1 else "<")
            calls.setdefault((group, a, b), [None] * len(runs))[k] = (verdict, r.text() if r else "-")
bad = 0
print("| workload | a | b | " + " | ".join(f"run {k + 1}" for k in range(len(runs))) + " |")
print("|---|---|---|" + "---|" * len(runs))
for (group, a, b), vs in sorted(calls.items()):
    signs = {v[0] for v in vs if v and v[0] != "tie"}
    bad += len(signs) > 1
    print(f"| {group} | {a} | {b} | " + " | ".join(f"{v[0]} {v[1]}" if v else "-" for v in vs) + " |")
print(f"\npairs called one way in one run and the other way in another: {bad} of {len(calls)}")
