"""Do the figures hold from one run to the next? `gpt2-conformance bench --across A.json B.json ...`

Reads two or more bench.json files (pytest-benchmark JSON written by `bench`, one per run) and
renders one Markdown table: each row's median in every run, its spread across the runs
((slowest - fastest run median) / fastest), its widest spread across processes inside one run,
its % of the limit in every run, how far its limit moved across the runs, and its paired % in
every run with its spread across them; then how many rows agree within 10% and 20%, and how
far the machine itself moved. Nothing is timed: this reads what the runs wrote. A row missing
from a run is shown as "-" and left out of the counts.

A row's limit is the machine streaming the same bytes in the same cache state, measured in the
same processes as the row (bandwidth.py `matched`): the control. On a machine whose own streams
move between runs (a shared host's memory bandwidth: 29-42 GB/s for one stream in three idle
runs here), a row doing the same kind of work cannot hold better than its control did, so the
table puts the two side by side and says how many rows moved no more than their control (a
row's own code slowing down moves it, not its limit). A row's % of its limit, timed round by round
beside its stream (verdict.py), is the figure meant to hold: the last line counts how many did.
"""

from __future__ import annotations

import statistics

from gpt2_conformance.bench.compare import read_bench_json
from gpt2_conformance.bench.processes import cross_process_spread_pct

AGREE_PCT = (10.0, 20.0)


def _rows(path: str) -> dict[str, dict]:
    data = read_bench_json(path)
    out = {}
    for b in data.get("benchmarks", []):
        extra = b.get("extra_info") or {}
        median = float(b["stats"]["median"])
        out[b["name"]] = {"median": median, "pct": extra.get("pct_of_limit"), "limit": extra.get("limit_gbps"),
                          "paired": extra.get("pct_paired"),
                          "process_spread": cross_process_spread_pct(extra.get("process_medians_s") or (), median)}
    return out


def spread_pct(values: list[float]) -> float:
    """(largest - smallest) / smallest, in percent."""
    return 100.0 * (max(values) - min(values)) / min(values)


def render(paths: list[str]) -> str:
    if len(paths) < 2:
        raise ValueError(f"--across needs two or more bench.json files, got {len(paths)}")
    runs = [_rows(p) for p in paths]
    names = list(dict.fromkeys(n for run in runs for n in run))
    head = " | ".join(f"run {i} ms" for i in range(1, len(runs) + 1))
    pcts = " | ".join(f"run {i} % limit" for i in range(1, len(runs) + 1))
    paired_head = " | ".join(f"run {i} paired %" for i in range(1, len(runs) + 1))
    lines = [f"| row | {head} | across runs | its limit across runs | widest across processes | {pcts} | "
             f"{paired_head} | paired across runs |", "|---|" + "---|" * (3 * len(runs) + 4)]
    agree = {p: 0 for p in AGREE_PCT}
    counted = 0
    controls, within_control = [], 0
    for name in names:
        cells = [run.get(name) for run in runs]
        ms = " | ".join("-" if c is None else f"{c['median'] * 1e3:.3f}" for c in cells)
        pct = " | ".join("-" if c is None or c["pct"] is None else f"{c['pct']:.0f}%" for c in cells)
        if all(c is not None for c in cells):
            across = spread_pct([c["median"] for c in cells])
            counted += 1
            for p in AGREE_PCT:
                agree[p] += across <= p
            across_cell = f"{across:.1f}%"
            processes = f"{max(c['process_spread'] for c in cells):.0f}%"
            control = spread_pct([c["limit"] for c in cells]) if all(c["limit"] for c in cells) else None
            if control is not None:
                controls.append(control)
                within_control += across <= max(control, AGREE_PCT[0])
        else:
            across_cell = processes = "-"
            control = None
        limit_cell = "-" if control is None else f"{control:.1f}%"
        paired = " | ".join("-" if c is None or not c["paired"] else f"{c['paired']:.0f}%" for c in cells)
        paired_across = (f"{spread_pct([c['paired'] for c in cells]):.1f}%"
                         if all(c is not None and c["paired"] for c in cells) else "-")
        lines.append(f"| {name} | {ms} | {across_cell} | {limit_cell} | {processes} | {pct} | {paired} "
                     f"| {paired_across} |")
    summary = "; ".join(f"{agree[p]} of {counted} rows within {p:g}%" for p in AGREE_PCT)
    lines += ["", f"Medians across the {len(runs)} runs ({', '.join(paths)}): {summary}."]
    for key, what in (("pct", "% of its limit"), ("paired", "paired % (timed round by round beside its stream)")):
        spreads = [spread_pct([run[n][key] for run in runs]) for n in names
                   if all(run.get(n, {}).get(key) for run in runs)]
        if spreads:
            held = "; ".join(f"{sum(x <= p for x in spreads)} of {len(spreads)} within {p:g}%" for p in AGREE_PCT)
            lines.append(f"Each row's {what} across the runs: {held}.")
    if controls:
        lines.append(f"The machine itself: each row's limit (the same bytes streamed in the row's own processes) moved "
                     f"by a median of {statistics.median(controls):.1f}% and up to {max(controls):.1f}% across these "
                     f"runs; {within_control} of {len(controls)} rows moved within {AGREE_PCT[0]:g}% or no more than "
                     "their limit did.")
    return "\n".join(lines)
