"""The regression gate: `bench --compare BASELINE.json --fail-above PCT`.

BASELINE is any pytest-benchmark JSON (a previous `bench` run, or
`pytest tests/benchmarks --run-bench --benchmark-json=...`). Benchmarks are matched by
fullname (then by name); a workload regressed when its median grew by more than PCT percent.
Benchmarks present on only one side are listed, never failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    name: str
    baseline_median: float
    median: float

    @property
    def pct(self) -> float:
        return 100.0 * (self.median - self.baseline_median) / self.baseline_median


def medians(data: dict) -> dict[str, float]:
    """{fullname: median seconds} of a pytest-benchmark JSON document."""
    out = {}
    for b in data.get("benchmarks", []):
        out[b.get("fullname") or b["name"]] = float(b["stats"]["median"])
    return out


def load(path: str) -> dict[str, float]:
    with open(path) as f:
        return medians(json.load(f))


def compare(baseline: dict[str, float], current: dict[str, float], fail_above: float
            ) -> tuple[list[Change], list[Change], list[str], list[str]]:
    """(regressions beyond fail_above, all matched changes, only in baseline, only in current)."""
    def short(key: str) -> str:
        return key.split("::")[-1]

    base_by_short = {short(k): v for k, v in baseline.items()}
    changes, matched = [], set()
    for key, med in current.items():
        base = baseline.get(key, base_by_short.get(short(key)))
        if base is None:
            continue
        matched.add(short(key))
        changes.append(Change(short(key), base, med))
    regressions = [c for c in changes if c.pct > fail_above]
    missing = sorted(k for k in base_by_short if k not in matched)
    new = sorted(short(k) for k in current if short(k) not in matched)
    return regressions, changes, missing, new


def report(regressions, changes, missing, new, fail_above: float) -> str:
    lines = [f"compare: {len(changes)} workloads matched the baseline; fail above +{fail_above:g}% (median)"]
    for c in sorted(changes, key=lambda c: -c.pct):
        flag = "REGRESSED" if c in regressions else "ok"
        lines.append(f"  {flag:9s} {c.name}: {c.baseline_median * 1e3:.3f} ms -> {c.median * 1e3:.3f} ms "
                     f"({c.pct:+.1f}%)")
    if missing:
        lines.append(f"  not measured now (in the baseline only): {', '.join(missing)}")
    if new:
        lines.append(f"  new (not in the baseline): {', '.join(new)}")
    if regressions:
        lines.append("compare: FAILED: " + "; ".join(f"{c.name} {c.pct:+.1f}%" for c in regressions))
    return "\n".join(lines)
