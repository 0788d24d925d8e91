"""The bench as text: the console table and the Markdown report (bench.md), and the lines they
share (memory bandwidth, each workload's limit and how far it moved between the run's processes,
the bars, the decode step, how busy the machine was)."""

from __future__ import annotations

import platform
import statistics

from gpt2_conformance.bench import workloads as wl
from gpt2_conformance.bench.across import spread_pct
from gpt2_conformance.bench.verdict import (CACHE_STATES, at_bar_shape, backend_order, bar, decode_steps,
                                            faulting_modes, frameworks, model_errors)

HEADER = ("workload", "shape", "backend", "mode", "median ms", "IQR ms", "processes", "min..max ms", "GB/s",
          "% limit", "paired %", "GFLOP/s", "first call ms", "threads", "faults/call", "check")
BUSY_THRESHOLD = 0.25  # cores other processes may use before the run is called busy


def _fmt_row(r: dict) -> tuple:
    w = r["workload"]
    if r.get("error"):
        return (w.name if w else r["group"], w.shape_id if w else "", r["backend"], r["mode"], "error", "", "", "",
                "", "", "", "", "", "", "", r["error"][:60])
    if w is None:  # time to verdict
        return ("time_to_verdict", "", r["backend"], "suite", f"{r['samples'][0] * 1e3:.0f}", "", "", "", "", "",
                "", "", "", "", "", r.get("verdict", ""))
    st = r["stats"]
    return (w.name, w.shape_id, r["backend"], r["mode"] + (" *" if r["is_fastest_mode"] else ""),
            f"{st['median'] * 1e3:.3f}", f"{st['iqr'] * 1e3:.3f}", _processes(r),
            f"{st['min'] * 1e3:.3f}..{st['max'] * 1e3:.3f}",
            f"{r['gbps']:.1f}", "MODEL ERROR" if r.get("model_error") else f"{r['pct_limit']:.0f}%",
            "" if r.get("paired_pct") is None else f"{r['paired_pct']:.0f}%", f"{r['gflops']:.1f}",
            f"{r['first_call_s'] * 1e3:.0f}",
            f"{r['threads']:.2f}", "" if r.get("faults") is None else f"{r['faults']:.0f}", r["check"])


def _processes(r: dict) -> str:
    """The row's median in each process and their spread ("" where it ran in one)."""
    medians = r.get("process_medians") or []
    if len(medians) < 2:
        return ""
    return "/".join(f"{m * 1e3:.3f}" for m in medians) + f" ({r['process_spread_pct']:.0f}%)"


def _bandwidth_lines(results: list[dict]) -> list[str]:
    lines = []
    for res in results:
        if res.get("skipped"):
            lines.append(f"{res['backend']} ({res['device']}): SKIPPED: {res['skipped']}")
            continue
        if res.get("error"):
            lines.append(f"{res['backend']} ({res['device']}): ERROR: {res['error']}")
            continue
        bw = res["bandwidth"]
        one = (f" (1 thread {bw['copy_1thread_gbps']:.1f}, all cores {bw['copy_all_cores_gbps']:.1f})"
               if "copy_1thread_gbps" in bw else "")
        cache = res.get("cache", {})
        llc = (f"; LLC {cache['llc_bytes'] / 2**20:.0f} MiB" if cache.get("llc_bytes") else "")
        flush = f"; cold = {cache['flush']}" if cache.get("flush") else ""
        lines.append(f"{res['backend']} ({res['device']}): 512 MiB copy {bw['copy_gbps']:.1f} GB/s "
                     f"[{bw['copy_gbps_min']:.1f}..{bw['copy_gbps_max']:.1f}]{one}, "
                     f"row gather {bw['gather_gbps']:.1f} GB/s "
                     f"[{bw['gather_gbps_min']:.1f}..{bw['gather_gbps_max']:.1f}] over {bw['bytes'] / 2**20:.0f} MiB"
                     f"{llc}{flush}; threads: {res.get('threads_setting', '')}; {res.get('cores', '?')} cores; "
                     f"import {res.get('import_s', 0):.1f} s; implementation: {res.get('implementation', '?')}")
    return lines


def _limit_lines(results: list[dict]) -> list[str]:
    """Each workload's limit once per distinct reference (the same in every backend's process
    up to noise; listed for the first backend that measured it)."""
    lines, seen = [], set()
    for res in results:
        for group, lim in res.get("limits", {}).items():
            if group in seen or "read" not in lim:
                continue
            seen.add(group)
            lines.append(f"{group}: reads {lim['read'] / 1e6:.2f} MB, writes {lim['write'] / 1e6:.2f} MB "
                         f"({lim.get('distinct_ids', '?')} distinct ids); limit {lim['gbps']:.1f} GB/s "
                         f"[{lim['gbps_min']:.1f}..{lim['gbps_max']:.1f}] {lim.get('cache', '')}"
                         + (f", {lim['threads']} thread(s)" if "threads" in lim else "") + f" ({res['backend']})")
    return lines


def drift_line(results: list[dict]) -> str | None:
    """How far the machine's own streams moved between this run's processes: each workload's
    limit as measured in every process of every backend. A row doing the same kind of work holds
    from run to run only about as well as its limit does (bench --across puts the two side by
    side); None with one process."""
    spreads = {}
    for res in results:
        for group, lim in res.get("limits", {}).items():
            spreads.setdefault(group, []).extend(lim.get("process_gbps") or [])
    spreads = {g: spread_pct(v) for g, v in spreads.items() if len(v) > 1 and min(v) > 0}
    if not spreads:
        return None
    widest = max(spreads, key=spreads.get)
    return (f"the machine itself: each workload's limit moved by up to {spreads[widest]:.0f}% between this run's "
            f"processes ({widest}), a median of {statistics.median(spreads.values()):.0f}% over the workloads; rows "
            "doing that work hold from one run to the next only about as well (compare runs with bench --across)")


def machine_line(results: list[dict], meta: dict | None) -> str:
    """Where the bars were measured: cores and last-level cache."""
    llc = next((r["cache"]["llc_bytes"] for r in results if r.get("cache", {}).get("llc_bytes")), None)
    cores = (meta or {}).get("cores") or next((r.get("cores") for r in results if r.get("cores")), "?")
    return (f"machine: {cores} cores, LLC {llc / 2**20:.0f} MiB" if llc else f"machine: {cores} cores, LLC unknown") \
        + f" ({platform.processor() or platform.machine()})"


def load_line(meta: dict) -> str:
    """What else ran on the machine during the bench (timing.OtherLoad), and what it means."""
    other = meta.get("other_load_cores")
    if other is None:
        return "load from other processes: not measured (no /proc/stat)"
    line = f"other processes kept {other:.2f} of {meta.get('cores', '?')} cores busy on average during this run"
    if other > BUSY_THRESHOLD:
        line += ": the machine was shared, so these figures are low and noisy; rerun on an idle machine for a verdict"
    return line


def _paired(v: dict) -> str:
    """The bar row's paired % (verdict.py: timed round by round beside its stream; what ranks)."""
    if v.get("paired_pct") is None:
        return ""
    low, high = v["paired_range"]
    return f"; paired with its stream {v['paired_pct']:.0f}%" + (f" ({low:.0f}..{high:.0f}%)" if high > low else "")


def _bar_lines(verdict: dict) -> list[str]:
    lines = []
    for b in backend_order():
        if b in verdict:
            v = verdict[b]
            need = "" if b not in frameworks() else (" meets the 2/3 bar" if v["meets"] else " BELOW the 2/3 bar")
            faults = f", {v['faults_per_call']:.0f} faults/call" if (v.get("faults_per_call") or 0) >= 1 else ""
            low, high = v.get("pct_range", (v["pct"], v["pct"]))
            spread = f" ({low:.0f}..{high:.0f}% over its processes)" if high > low else ""
            u = v.get("unchecked")
            off = f"; without the check: {u['mode']} {u['median_ms']:.2f} ms, {u['pct']:.0f}%" if u else ""
            lines.append(f"{b}: fastest measured mode with the check on: {v['mode']} ({v['check']}) "
                         f"{v['median_ms']:.2f} ms, {v['gbps']:.1f} of {v['limit_gbps']:.1f} GB/s = "
                         f"{v['pct']:.0f}% of the limit{spread}{faults}{need}{_paired(v)}{off}")
    if "best" in verdict:
        v = verdict["best"]
        by = f", paired {v['paired_pct']:.0f}%" if v.get("ranked_by") == "paired_pct" else ""
        meets = "meets" if v["meets"] else "BELOW"
        bar = f"{v['pct']:.0f}% of the limit{by} ({meets} the {100 * wl.BEST_FRACTION:.0f}% bar)"
        if v.get("ranked", True):
            lines.append(f"best framework: {v['backend']} {bar}")
        else:
            lines.append(f"best framework: NOT RANKED: {v['why']}; highest: {v['backend']} {bar}")
    return lines or ["no framework backend timed at this shape with its check on"]


def _bar_section(results: list[dict], rows: list[dict], meta: dict | None) -> list[tuple[str, list[str]]]:
    """[(title, lines)] for the warm bar, the cold bar, faulting modes and model errors."""
    out = []
    shared = (meta or {}).get("other_load_cores") or 0
    for cache in CACHE_STATES:
        at = at_bar_shape(cache)
        if not any(r.get("workload") is not None and at(r["workload"]) for r in rows):
            continue
        lines = _bar_lines(bar(rows, cache))
        faulted = faulting_modes(rows, at)
        if faulted:
            lines.append("checked modes that page-faulted here (their time follows the allocator's state; the bar "
                         "takes the fastest checked mode): " + "; ".join(faulted))
        note = f"; NOT A VERDICT: other processes kept {shared:.2f} cores busy" if shared > BUSY_THRESHOLD else ""
        out.append((f"bar at forward_prefill B=8, T=1024, d=768, {cache} (each row against the same bytes "
                    f"streamed {cache}); {machine_line(results, meta)}{note}", lines))
    errors = model_errors(rows)
    if errors:
        # on a shared machine a limit streamed while it was busier than its row reads low: not the model's fault yet
        why = ("the byte model or the reference is wrong for them" if shared <= BUSY_THRESHOLD else
               f"NOT A VERDICT: other processes kept {shared:.2f} cores busy, so a limit may have been streamed while "
               "the machine was busier than its row; rerun idle before taking these as the byte model's error")
        out.append((f"MODEL ERRORS: rows above 100% of their limit ({why}; no percentage shown, never counted for "
                    "a bar)", errors))
    return out


def _step_lines(steps: list[dict]) -> list[list[str]]:
    def ms(v):
        return "" if v is None else f"{v:.3f}"
    head = ("backend", "mode", "step ms", "IQR ms", "embedding ms", "head ms", "% limit", "implementation")
    table = [head] + [(s["backend"], s["mode"], ms(s["median_ms"]), ms(s["iqr_ms"]), ms(s["embed_ms"]),
                       ms(s["head_ms"]), "MODEL ERROR" if s["model_error"] else
                       ("" if s["pct_limit"] is None else f"{s['pct_limit']:.0f}%"), s["implementation"])
                      for s in steps]
    return [list(map(str, row)) for row in table]


class ConsoleTable:
    """What `bench` prints: bandwidth and limits, the results table, the decode step, the bars."""

    def render(self, results: list[dict], rows: list[dict], meta: dict | None = None) -> str:
        table = [HEADER] + [_fmt_row(r) for r in rows]
        widths = [max(len(str(row[i])) for row in table) for i in range(len(HEADER) - 1)]
        lines = [f"{load_line(meta)}; allocator: {meta.get('malloc', 'retain')}"] if meta else []
        lines += ["memory bandwidth (measured in each backend's process):"]
        lines += ["  " + s for s in _bandwidth_lines(results)]
        limits = _limit_lines(results)
        if limits:
            lines += ["each workload's limit (the same bytes streamed in the same cache state, measured here):"]
            lines += ["  " + s for s in limits]
        drift = drift_line(results)
        if drift:
            lines.append(drift)
        lines.append("")
        for row in table:
            lines.append("  ".join(str(c).ljust(widths[i]) if i < len(widths) else str(c) for i, c in enumerate(row)))
        lines += ["", "* = the backend's declared fastest mode (the bar takes the fastest measured mode with the check "
                  "on); GB/s counts the least bytes in conformance/bench/workloads.py; % limit divides it by the row's "
                  "own limit; paired % = the row against its limit's stream timed round by round beside it (what "
                  "ranks: it holds from run to run; higher than % limit, the stream being slower between calls); "
                  "processes = the row's median in each fresh process and (their spread); threads = process CPU "
                  "time / wall time; faults/call = minor page faults per timed call",
                  ""]
        steps = decode_steps(rows)
        if steps:
            lines += ["decode step (embedding + tied head, B=1, T=1: what each generated token pays), fastest first:"]
            step_table = _step_lines(steps)
            w = [max(len(r[i]) for r in step_table) for i in range(len(step_table[0]))]
            lines += ["  " + "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in step_table]
            lines.append("")
        for title, section in _bar_section(results, rows, meta):
            lines += [title + ":"] + ["  " + s for s in section]
        return "\n".join(lines)


class MarkdownReport:
    """bench.md: the console's figures as a report, with the decode-step PNG linked where
    meta["step_png"] names it."""

    filename = "bench.md"

    def render(self, results: list[dict], rows: list[dict], meta: dict) -> str:
        out = [f"# gpt2-conformance bench ({meta.get('device', 'cpu')}{', quick' if meta.get('quick') else ''})", "",
               f"{meta.get('datetime', '')}, {meta.get('cores', '?')} cores, wall time {meta.get('wall_s', 0):.0f} s; "
               f"{load_line(meta)}; allocator: {meta.get('malloc', 'retain')}", "",
               "## Memory bandwidth and each workload's limit", ""]
        out += ["- " + s for s in _bandwidth_lines(results)]
        out += ["", "A row's limit is a streaming reference (copy, plus a read-only or write-only pass) moving the "
                "same bytes as the workload must, in the same cache state (warm: repeated; cold: caches emptied "
                "before each round), measured in the same process (conformance/bench/bandwidth.py `matched`):", ""]
        out += ["- " + s for s in _limit_lines(results)]
        drift = drift_line(results)
        if drift:
            out += ["", drift[0].upper() + drift[1:] + "."]
        for title, section in _bar_section(results, rows, meta):
            out += ["", f"## {title[0].upper()}{title[1:]}", ""] + ["- " + s for s in section]
        steps = decode_steps(rows)
        if steps:
            table = _step_lines(steps)
            out += ["", "## Decode step (embedding + tied head at B=1, T=1)", "",
                    "What each generated token pays for the embedding and the tied head, in one call; the embedding "
                    "and the head as timed apart beside it. Fastest first.", "",
                    "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
            out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table[1:]]
            if meta.get("step_png"):
                out += ["", f"![decode step]({meta['step_png']})"]
        out += ["", "## Results", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        for r in rows:
            out.append("| " + " | ".join(str(c).replace("|", "/") for c in _fmt_row(r)) + " |")
        out += ["", "`*` marks the backend's declared fastest mode; the bar takes the fastest measured mode with the "
                "check on. GB/s counts the least bytes each workload must move (conformance/bench/workloads.py); "
                "% limit divides it by the row's own limit; MODEL ERROR marks a row above 100% of it. "
                "paired % sets the row against its limit's stream timed round by round beside it, each pair meeting "
                "the same seconds of the machine: it holds from run to run and ranks frameworks; it is higher than "
                "% limit, a stream run between a row's calls being slower than one run back to back. "
                "threads = process CPU time / wall time over the steady state; faults/call = minor page faults per "
                "timed call (a fresh output whose pages the allocator gave back to the OS faults in anew: see "
                "`bench --malloc system`).",
                "", "## Modes", ""]
        for res in results:
            for mode, desc in res.get("modes", {}).items():
                out.append(f"- {res['backend']} `{mode}`: {desc}")
        return "\n".join(out) + "\n"

    def write(self, results: list[dict], rows: list[dict], meta: dict, path: str) -> str:
        content = self.render(results, rows, meta)  # made before the file is opened: no half-written file
        with open(path, "w") as f:
            f.write(content)
        return path
