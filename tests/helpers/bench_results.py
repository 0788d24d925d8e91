"""Made-up bench runs for the bench's tests: rows with known block times, run through the real
summary (summary.workload_table), so the renderers and the gate see what a run gives them."""

from __future__ import annotations

import numpy as np

from gpt2_conformance.bench import session, summary
from gpt2_conformance.bench import workloads as wl
from gpt2_conformance.bench.worker import LIMIT, key_of

# the least bytes of the bar shape, by hand: wte rows + wpe rows once + h
BAR_BYTES = 8 * 1024 * 768 * 4 + 1024 * 768 * 4 + 8 * 1024 * 768 * 4
BAR = wl.standard("forward_prefill")


def blocks(median: float, rounds: int = 8, seed: int = 0) -> list[dict]:
    """One block per round around `median`, the rounds drifting +-20% as the machine does."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(rounds):
        m = median * (1 + 0.2 * np.sin(r)) * (1 + 0.01 * rng.standard_normal())
        out.append(
            {"samples": [m * 0.99, m, m * 1.01], "calls_per_sample": 4, "cpu_ratio": 1.0, "faults_per_call": 0.0}
        )
    return out


def side(label: str, backend: str | None = None) -> session.Side:
    s = session.Side(label, backend or label, None)
    s.info = {"implementation": f"{backend or label} 1.0", "check": {"suite": "on"}, "modes": {"suite": "its mode"}}
    return s


def table(medians: dict[str, float], w: wl.Workload = BAR, limit: float | None = None, errors=()) -> dict:
    """summary.workload_table for rows {label: median seconds} in mode "suite", the limit's
    streams at `limit` seconds (one of them; the other twice as slow), and rows named in `errors`
    failed."""
    rows = []
    for i, (label, median) in enumerate(medians.items()):
        row = session.Row(
            side(label), "suite", w, key_of("suite", w), {"first_call_s": 0.1}, blocks=blocks(median, seed=i)
        )
        if label in errors:
            row.blocks, row.error = [], f"{label} failed"
        rows.append(row)
    for threads, factor in ((1, 2.0), (2, 1.0)) if limit is not None else ():
        rows.append(
            session.Row(
                side(LIMIT),
                f"stream-{threads}",
                w,
                key_of(f"stream-{threads}", w),
                {"description": "numpy stream", "distinct_ids": w.batch * w.seq},
                blocks=blocks(limit * factor, seed=0),
            )
        )
    return summary.workload_table(w, rows, "cpu")


META = {"device": "cpu", "cores": 2, "rounds": 8, "block_s": 0.08, "other_load_cores": 0.01, "root": "."}
