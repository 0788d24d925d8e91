"""One backend timed in several fresh processes: their results combined into one.

Why: within one process a row's samples can agree to 1% while the next process of the same
code, a minute later on the same idle machine, gives a median 10-50% away. Mostly the machine
moving in time: the bar shape's stream moved 35-51% within 18 s of one process, as much as
between fresh processes, while six buffers of one process streamed within 1-17% of each other
(reports/bench/cpu-2026-12-06-memory-drift.md); nor is it which pages are huge (every process
got them and still spread, reports/bench/cpu-2026-12-06-huge-pages.md). A row timed in one block
of a second or two meets one moment of that drift, so the spread inside one process says nothing
about the next, and a regression gate that judges by it alone fails a run compared with itself.
`bench --processes N` runs every backend's child N times, the backends interleaved round by
round (so a slow minute of the machine falls on every backend, not on one), and each row keeps
every process's median: its cross-process spread is what the gate (compare.py) and the bar
lines (verdict.py) judge against.

A combined row's samples are all processes' samples together (its pytest-benchmark stats are
theirs); "process_medians" lists each process's own median in the order they ran, and
"process_paired" each process's % of its limit timed round by round beside it (child.py
paired_pct). A row's limit is the median of its processes' measured limits. A process that
failed makes the backend's result an error (the first one, naming its process); one that skipped
makes it skipped.
"""

from __future__ import annotations

import statistics

from gpt2_conformance.bench.stats import summary


def _key(rec: dict) -> tuple:
    w = rec.get("workload") or {}
    return rec["mode"], tuple(sorted(w.items())) if w else rec.get("n_embd")


def _combined_record(recs: list[dict]) -> dict:
    # a workload that failed in one process is an error, as in one process (its pairs may fail
    # after its timing did: the record then has stats and an error)
    timed = [r for r in recs if "stats" in r and not r.get("error")]
    if len(timed) < len(recs):
        failed = next(r for r in recs if r not in timed)
        return dict(failed, process_medians=[r["stats"]["median"] for r in timed])
    samples = [s for r in timed for s in r["samples"]]
    faults = [r["faults_per_call"] for r in timed if r.get("faults_per_call") is not None]
    paired = [r["paired"] for r in timed if "paired" in r]
    first = {k: v for k, v in timed[0].items() if k != "paired"}  # each process's pairs are in process_paired
    return dict(first, samples=samples, stats=summary(samples),
                process_medians=[r["stats"]["median"] for r in timed],
                process_paired=paired if len(paired) == len(timed) else None,
                first_call_s=statistics.median(r["first_call_s"] for r in timed),
                cpu_ratio=statistics.median(r["cpu_ratio"] for r in timed),
                faults_per_call=max(faults) if faults else None)


def _combined_limits(results: list[dict]) -> dict:
    groups = {}
    for res in results:
        for group, lim in (res.get("limits") or {}).items():
            groups.setdefault(group, []).append(lim)
    out = {}
    for group, lims in groups.items():
        gbps = statistics.median(lim["gbps"] for lim in lims)
        out[group] = dict(min(lims, key=lambda lim: abs(lim["gbps"] - gbps)), gbps=gbps,
                          process_gbps=[lim["gbps"] for lim in lims],
                          process_gbps_max=[lim.get("gbps_max", lim["gbps"]) for lim in lims])
    return out


def combine(results: list[dict]) -> dict:
    """One result for a backend from its processes' results (module docstring)."""
    if len(results) == 1:
        return results[0]
    for i, res in enumerate(results, 1):
        if res.get("error"):
            return dict(res, error=f"process {i} of {len(results)}: {res['error']}")
    skipped = next((res for res in results if res.get("skipped")), None)
    if skipped is not None:
        return skipped
    by_key: dict[tuple, list[dict]] = {}
    for res in results:
        for rec in res.get("records", []):
            by_key.setdefault(_key(rec), []).append(rec)
    records = [_combined_record(recs) for recs in by_key.values()]
    return dict(results[0], records=records, limits=_combined_limits(results))


def cross_process_spread_pct(process_medians: list[float] | tuple[float, ...], median: float) -> float:
    """(slowest - fastest process median) / the row's median, in percent; 0 for one process."""
    if len(process_medians) < 2 or not median:
        return 0.0
    return 100.0 * (max(process_medians) - min(process_medians)) / median
