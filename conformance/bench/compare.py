"""`bench --compare BASELINE.json`: this run's medians beside a stored run's, row by row.

ADVISORY, never a gate: the two runs were not timed together, and on the shared machines this
runs on a median moves by 10-50% from one run to the next with no change to the code (the
machine's memory speed drifts over seconds). What a gate needs is both sides timed in the same
run: `bench --adapter NEW --against BASE --fail-above PCT` (gate.py). BASELINE is any
pytest-benchmark JSON (a previous `bench` run, or `pytest tests/benchmarks --run-bench
--benchmark-json=...`), read as merge reads it; benchmarks are matched by fullname.
"""

from __future__ import annotations

from gpt2_conformance.merge.inputs import load_bench


def report(baseline_path: str, current_path: str) -> str:
    """One line per row both runs timed: the medians and the change; then what only one side has."""
    old, new = ({r["fullname"]: r["median_s"] for r in load_bench(p)} for p in (baseline_path, current_path))
    lines = [
        f"compare with {baseline_path} (ADVISORY: the two runs were not timed together, so a change "
        "within the machine's drift means nothing; gate with --against)"
    ]
    for name in (n for n in new if n in old):
        change = 100 * (new[name] / old[name] - 1)
        lines.append(f"  {name}: {old[name] * 1e3:.3f} ms -> {new[name] * 1e3:.3f} ms ({change:+.1f}%)")
    lines += [f"  only in this run: {n}" for n in new if n not in old]
    lines += [f"  only in the baseline: {n}" for n in old if n not in new]
    return "\n".join(lines)
