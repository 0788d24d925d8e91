"""From the rounds' blocks to the run's figures: per workload, every row ranked with its ratio to
the fastest and its interval, its median, and its % of the limit (a roofline column).

A row is a plain dict (the JSON outputs and the renderers read the same keys):
  backend, label, mode, implementation, check, workload (its group), kind, phase, batch, seq,
  n_embd, past_length, cache, device; median_s (over every sample of every block), samples,
  block_medians (by round), calls_per_sample, threads_used, faults_per_call, first_call_s;
  ratio, ci_low, ci_high, rank; pct_of_limit, pct_low, pct_high, limit_gbps, gbps, gflops, bytes_moved,
  model_error; error (a row that failed has only its identity and the error).
"""

from __future__ import annotations

import statistics

from gpt2_conformance.bench import ranking, workloads
from gpt2_conformance.bench.worker import LIMIT


def _identity(row, device: str) -> dict:
    w, info = row.workload, row.side.info
    return {
        "backend": row.side.backend,
        "label": row.side.label,
        "mode": row.mode,
        "implementation": info.get("implementation", ""),
        "check": info.get("check", {}).get(row.mode, ""),
        "mode_description": info.get("modes", {}).get(row.mode, ""),
        "workload": w.group,
        "name": w.name,
        "kind": w.kind,
        "phase": w.phase,
        "batch": w.batch,
        "seq": w.seq,
        "n_embd": w.n_embd,
        "past_length": w.past_length,
        "cache": w.cache,
        "device": device,
    }


def _timed(row) -> dict:
    blocks = [b for b in row.blocks if b is not None]
    samples = [s for b in blocks for s in b["samples"]]
    return {
        "samples": samples,
        "median_s": statistics.median(samples),
        "block_medians": ranking.block_medians(row.blocks),
        "calls_per_sample": blocks[0]["calls_per_sample"],
        "threads_used": round(statistics.median(b["cpu_ratio"] for b in blocks), 2),
        "faults_per_call": statistics.median(b["faults_per_call"] for b in blocks),
        "first_call_s": row.prep.get("first_call_s"),
    }


def workload_table(w: workloads.Workload, rows: list, device: str, cohorts: int = 1) -> dict:
    """{"workload": w as a dict, "group", "limit": the limit's figures or None, "rows": ranked rows
    first, then rows that failed, "cohorts"}."""
    streams = [r for r in rows if r.side.backend == LIMIT and not r.error and r.blocks]
    # each round's limit: the faster of the streams (one thread, every core) in that round
    limit = [
        min((t for t in ts if t is not None), default=None)
        for ts in zip(*(ranking.block_medians(r.blocks) for r in streams), strict=True)
    ]
    nbytes = workloads.bytes_moved(w, streams[0].prep["distinct_ids"] if streams else None)
    timed = [r for r in rows if r.side.backend != LIMIT and not r.error and any(b is not None for b in r.blocks)]
    medians = {r.name: ranking.block_medians(r.blocks) for r in timed}
    ranked = {x.name: x for x in ranking.rank(medians, cohorts)}  # fastest first
    order = {name: i for i, name in enumerate(ranked)}
    out = []
    for r in sorted(timed, key=lambda r: order.get(r.name, len(order))):
        row = {**_identity(r, device), **_timed(r)}
        to_fastest = ranked[r.name].ratio if r.name in ranked else None
        row.update(
            ratio=to_fastest and to_fastest.ratio,
            ci_low=to_fastest and to_fastest.low,
            ci_high=to_fastest and to_fastest.high,
            rank=ranked[r.name].rank if r.name in ranked else None,
            bytes_moved=nbytes,
            gbps=nbytes / row["median_s"] / 1e9,
            gflops=workloads.flops(w) / row["median_s"] / 1e9,
        )
        pct = ranking.pct_of_limit(medians[r.name], limit, cohorts) if streams else None
        if pct is not None:
            row.update(
                pct_of_limit=pct.ratio,
                pct_low=pct.low,
                pct_high=pct.high,
                limit_gbps=row["gbps"] * 100 / pct.ratio,
                model_error=None,
            )
            if pct.low > 100:  # beats a stream of its own least bytes: the byte model is wrong, no % shown
                row.update(
                    model_error=f"{pct.ratio:.0f}% of its limit [{pct.low:.0f}, {pct.high:.0f}]",
                    pct_of_limit=None,
                    pct_low=None,
                    pct_high=None,
                )
        out.append(row)
    out += [
        {**_identity(r, device), "error": r.error or "no block was timed"}
        for r in rows
        if r.side.backend != LIMIT and r not in timed
    ]
    limit_row = None
    if streams:
        median = statistics.median(t for t in limit if t is not None)
        fastest = min(streams, key=lambda r: statistics.median(t for t in ranking.block_medians(r.blocks) if t))
        limit_row = {
            "description": fastest.prep.get("description", ""),
            "median_s": median,
            "gbps": nbytes / median / 1e9,
        }
    return {"workload": w.as_dict(), "group": w.group, "limit": limit_row, "rows": out, "cohorts": cohorts}
