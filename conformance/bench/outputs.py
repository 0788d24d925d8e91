"""The outputs of a bench run: console table, the raw results, pytest-benchmark JSON, Markdown,
and two PNGs (GB/s per workload; the decode step per implementation).

A "row" is one timed (backend, mode, workload) with its stats and derived figures; rows()
builds them from the children's results. Each row's "% of the limit" divides its GB/s (the
least bytes it must move, workloads.py) by its own limit (a streaming reference moving the same
bytes in the same cache state, bandwidth.matched); a row above 100% is a model error: flagged,
never shown as a result, never counted for the bar.

The JSON is pytest-benchmark's own layout (machine_info, commit_info, benchmarks[{group, name,
fullname, params, param, extra_info, options, stats{min, max, mean, stddev, rounds, median,
iqr, q1, q3, ..., ops, total, data}}], datetime, version), so `pytest-benchmark compare` and
`--benchmark-compare` read it. Every output is written on its own (write_all): one that fails
(a missing optional package, say) costs that output and a line saying so, never the others.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform

from gpt2_conformance.bench import workloads as wl



def backend_order() -> list[str]:
    """Rows and columns in the registry's order (the NumPy reference first)."""
    from gpt2_conformance import registry

    return registry.available()


def frameworks() -> list[str]:
    """The backends the 2/3 bar applies to: our reference backends on a framework (not NumPy's)."""
    from gpt2_conformance import registry

    return [n for n in registry.references() if n != registry.NUMPY_REFERENCE]
# names and fullnames are those of the pytest-benchmark suite's tests, so a `bench` JSON and a
# `pytest tests/benchmarks --run-bench --benchmark-json` JSON compare with each other
SUITE_FILE = "tests/benchmarks/test_embedding_speed.py"


def _limit(result: dict, w: wl.Workload) -> tuple[float, str]:
    """(GB/s, what it is) of the row's limit: its matched reference where the child measured
    one, else (older results) the 512 MiB copy."""
    lim = result.get("limits", {}).get(w.group)
    if lim:
        return lim["gbps"], lim.get("method") or f"{lim['cache']} stream of the same bytes"
    return result.get("bandwidth", {}).get("copy_gbps", float("nan")), "512 MiB copy (not matched)"


def over_limit(pct: float) -> bool:
    """A row above 100% of its limit: the byte model or the reference is wrong for it."""
    return pct > 100.0


def rows(results: list[dict]) -> list[dict]:
    """One dict per timed record, with name/fullname/group as pytest-benchmark has them."""
    out = []
    for res in results:
        for rec in res.get("records", []):
            if "workload" not in rec:
                continue
            w = wl.Workload(**rec["workload"])
            limit, limit_kind = _limit(res, w)
            backend, mode = res["backend"], rec["mode"]
            param = f"{backend}-{mode}-{w.shape_id}"
            row = {"backend": backend, "mode": mode, "device": res["device"], "workload": w,
                   "name": f"test_{w.name}[{param}]", "fullname": f"{SUITE_FILE}::test_{w.name}[{param}]",
                   "group": w.group, "param": param, "implementation": res.get("implementation", ""),
                   "check": res.get("check", {}).get(mode, ""), "limit_gbps": limit, "limit_kind": limit_kind,
                   "mode_description": res.get("modes", {}).get(mode, ""),
                   "is_suite_mode": mode == res.get("suite_mode"), "is_fastest_mode": mode == res.get("fastest_mode"),
                   "error": rec.get("error")}
            if "stats" in rec:
                med = rec["stats"]["median"]
                nbytes = wl.bytes_moved(w, rec.get("distinct_ids"))
                pct = 100 * nbytes / med / 1e9 / limit
                row.update(stats=rec["stats"], samples=rec["samples"], first_call_s=rec["first_call_s"],
                           threads=round(rec["cpu_ratio"], 2), faults=rec.get("faults_per_call"), bytes=nbytes,
                           distinct_ids=rec.get("distinct_ids"), gbps=nbytes / med / 1e9,
                           gflops=wl.flops(w) / med / 1e9)
                if over_limit(pct):
                    row["model_error"] = (f"{pct:.0f}% of its limit ({nbytes / 1e6:.1f} MB in {med * 1e3:.3f} ms "
                                          f"against {limit:.1f} GB/s, {limit_kind})")
                else:
                    row["pct_limit"] = pct
            out.append(row)
    order = {b: i for i, b in enumerate(backend_order())}
    kinds = {k: i for i, k in enumerate(wl.KINDS)}
    out.sort(key=lambda r: (kinds[r["workload"].kind], r["workload"].phase != "prefill", r["workload"].n_embd,
                            r["workload"].batch, r["workload"].seq, order.get(r["backend"], 99), r["mode"]))
    return out


def verdict_rows(verdicts: list[dict]) -> list[dict]:
    """Time-to-verdict (the conformance run per backend) as rows with a single sample."""
    out = []
    for v in verdicts:
        param = f"{v['backend']}-{v['device']}"
        out.append({"backend": v["backend"], "mode": "suite", "device": v["device"], "workload": None,
                    "name": f"test_time_to_verdict[{param}]", "fullname": f"{SUITE_FILE}::test_time_to_verdict[{param}]",
                    "group": "time_to_verdict", "param": param, "samples": [v["seconds"]],
                    "verdict": v.get("summary", ""), "error": v.get("error")})
    return out


# -- the bar ----------------------------------------------------------------------------
def _fastest_checked(rows_: list[dict], at_shape) -> dict[str, dict]:
    """{backend: row} of each backend's fastest measured mode with its bounds check on, among
    the rows whose workload at_shape(workload) accepts. A row flagged as a model error has no
    percentage and never counts."""
    best = {}
    for r in rows_:
        w = r["workload"]
        if w is None or not at_shape(w) or "pct_limit" not in r or not r["check"].startswith("on"):
            continue  # only modes whose bounds check is on count
        if r["backend"] not in best or r["pct_limit"] > best[r["backend"]]["pct_limit"]:
            best[r["backend"]] = r
    return best


def bar(rows_: list[dict], cache: str = "warm") -> dict:
    """The bar at B=8, T=1024, d=768 (issue 12), warm or cold: each framework's fastest measured
    mode with its bounds check on >= 2/3 of its limit (the same bytes streamed in the same
    cache state), the best one >= 90%. {backend: {mode, pct, meets, ...}} plus "best"."""
    at = (lambda w: w.is_bar_shape) if cache == "warm" else (lambda w: w.is_cold_bar_shape)
    verdict = {}
    for backend, r in _fastest_checked(rows_, at).items():
        verdict[backend] = {"mode": r["mode"], "pct": r["pct_limit"], "check": r["check"],
                            "median_ms": r["stats"]["median"] * 1e3, "declared_fastest": r["is_fastest_mode"],
                            "gbps": r["gbps"], "limit_gbps": r["limit_gbps"], "faults_per_call": r.get("faults"),
                            "meets": backend not in frameworks() or r["pct_limit"] >= 100 * wl.BAR_FRACTION}
    framework_rows = {b: v for b, v in verdict.items() if b in frameworks()}
    if framework_rows:
        best = max(framework_rows, key=lambda b: framework_rows[b]["pct"])
        verdict["best"] = {"backend": best, "pct": framework_rows[best]["pct"],
                           "meets": framework_rows[best]["pct"] >= 100 * wl.BEST_FRACTION}
    return verdict


def cold_bar(results: list[dict], rows_: list[dict]) -> dict:
    """The bar with the caches emptied before each call (each row against a cold reference)."""
    return bar(rows_, "cold")


def faulting_modes(rows_: list[dict], at_shape) -> list[str]:
    """Checked modes at a shape that page-faulted (>= 1 minor fault per call): their time
    follows the allocator's state, not the implementation (see bench --malloc), so the bar takes
    the fastest checked mode and this list says which ones faulted."""
    return [f"{r['backend']} {r['mode']} ({r['faults']:.0f} faults/call, {r['stats']['median'] * 1e3:.2f} ms)"
            for r in rows_ if r.get("workload") is not None and at_shape(r["workload"]) and "stats" in r
            and r["check"].startswith("on") and (r.get("faults") or 0) >= 1]


def model_errors(rows_: list[dict]) -> list[str]:
    return [f"{r['group']} {r['backend']} {r['mode']}: {r['model_error']}" for r in rows_ if r.get("model_error")]


def decode_steps(rows_: list[dict]) -> list[dict]:
    """The decode-step table: per implementation and mode, one generated token's embedding +
    tied head at B=1, T=1 (one call), with the two parts as timed apart. Fastest first."""
    def median_of(backend, mode, kind, w):
        for r in rows_:
            v = r.get("workload")
            if (r["backend"], r["mode"]) == (backend, mode) and v is not None and "stats" in r and v.kind == kind \
                    and (v.batch, v.seq, v.n_embd, v.past_length, v.cache) == (w.batch, w.seq, w.n_embd,
                                                                               w.past_length, w.cache):
                return r["stats"]["median"] * 1e3
        return None
    out = []
    for r in rows_:
        w = r.get("workload")
        if w is None or w.kind != "step" or "stats" not in r:
            continue
        out.append({"backend": r["backend"], "mode": r["mode"], "implementation": r.get("implementation", ""),
                    "shape": w.shape_id, "median_ms": r["stats"]["median"] * 1e3, "iqr_ms": r["stats"]["iqr"] * 1e3,
                    "embed_ms": median_of(r["backend"], r["mode"], "forward", w),
                    "head_ms": median_of(r["backend"], r["mode"], "logits", w),
                    "pct_limit": r.get("pct_limit"), "model_error": r.get("model_error"), "check": r["check"]})
    return sorted(out, key=lambda s: s["median_ms"])


# -- console / markdown -----------------------------------------------------------------
HEADER = ("workload", "shape", "backend", "mode", "median ms", "IQR ms", "min..max ms", "GB/s", "% limit",
          "GFLOP/s", "first call ms", "threads", "faults/call", "check")


def _fmt_row(r: dict) -> tuple:
    w = r["workload"]
    if r.get("error"):
        return (w.name if w else r["group"], w.shape_id if w else "", r["backend"], r["mode"], "error", "", "",
                "", "", "", "", "", "", r["error"][:60])
    if w is None:  # time to verdict
        return ("time_to_verdict", "", r["backend"], "suite", f"{r['samples'][0] * 1e3:.0f}", "", "", "", "",
                "", "", "", "", r.get("verdict", ""))
    st = r["stats"]
    return (w.name, w.shape_id, r["backend"], r["mode"] + (" *" if r["is_fastest_mode"] else ""),
            f"{st['median'] * 1e3:.3f}", f"{st['iqr'] * 1e3:.3f}", f"{st['min'] * 1e3:.3f}..{st['max'] * 1e3:.3f}",
            f"{r['gbps']:.1f}", "MODEL ERROR" if r.get("model_error") else f"{r['pct_limit']:.0f}%", f"{r['gflops']:.1f}", f"{r['first_call_s'] * 1e3:.0f}",
            f"{r['threads']:.2f}", "" if r.get("faults") is None else f"{r['faults']:.0f}", r["check"])


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


def machine_line(results: list[dict], meta: dict | None) -> str:
    """Where the bars were measured: cores and last-level cache."""
    llc = next((r["cache"]["llc_bytes"] for r in results if r.get("cache", {}).get("llc_bytes")), None)
    cores = (meta or {}).get("cores") or next((r.get("cores") for r in results if r.get("cores")), "?")
    import platform

    return (f"machine: {cores} cores, LLC {llc / 2**20:.0f} MiB" if llc else f"machine: {cores} cores, LLC unknown") \
        + f" ({platform.processor() or platform.machine()})"


def _bar_lines(verdict: dict) -> list[str]:
    lines = []
    for b in backend_order():
        if b in verdict:
            v = verdict[b]
            need = "" if b not in frameworks() else (" meets the 2/3 bar" if v["meets"] else " BELOW the 2/3 bar")
            faults = f", {v['faults_per_call']:.0f} faults/call" if (v.get("faults_per_call") or 0) >= 1 else ""
            lines.append(f"{b}: fastest measured mode with the check on: {v['mode']} ({v['check']}) "
                         f"{v['median_ms']:.2f} ms, {v['gbps']:.1f} of {v['limit_gbps']:.1f} GB/s = "
                         f"{v['pct']:.0f}% of the limit{faults}{need}")
    if "best" in verdict:
        v = verdict["best"]
        lines.append(f"best framework: {v['backend']} {v['pct']:.0f}% "
                     f"({'meets' if v['meets'] else 'BELOW'} the {100 * wl.BEST_FRACTION:.0f}% bar)")
    return lines or ["no framework backend timed at this shape with its check on"]


def _bar_section(results, rows_, meta) -> list[tuple[str, list[str]]]:
    """[(title, lines)] for the warm bar, the cold bar, faulting modes and model errors."""
    out = []
    for cache in ("warm", "cold"):
        at = (lambda w: w.is_bar_shape) if cache == "warm" else (lambda w: w.is_cold_bar_shape)
        if not any(r.get("workload") is not None and at(r["workload"]) for r in rows_):
            continue
        lines = _bar_lines(bar(rows_, cache))
        faulted = faulting_modes(rows_, at)
        if faulted:
            lines.append("checked modes that page-faulted here (their time follows the allocator's state; the bar "
                         "takes the fastest checked mode): " + "; ".join(faulted))
        shared = (meta or {}).get("other_load_cores") or 0
        note = f"; NOT A VERDICT: other processes kept {shared:.2f} cores busy" if shared > BUSY_THRESHOLD else ""
        out.append((f"bar at forward_prefill B=8, T=1024, d=768, {cache} (each row against the same bytes "
                    f"streamed {cache}); {machine_line(results, meta)}{note}", lines))
    errors = model_errors(rows_)
    if errors:
        out.append(("MODEL ERRORS: rows above 100% of their limit (the byte model or the reference is wrong for "
                    "them; no percentage shown, never counted for a bar)", errors))
    return out


def _step_lines(steps: list[dict]) -> list[str]:
    def ms(v):
        return "" if v is None else f"{v:.3f}"
    head = ("backend", "mode", "step ms", "IQR ms", "embedding ms", "head ms", "% limit", "implementation")
    table = [head] + [(s["backend"], s["mode"], ms(s["median_ms"]), ms(s["iqr_ms"]), ms(s["embed_ms"]),
                       ms(s["head_ms"]), "MODEL ERROR" if s["model_error"] else
                       ("" if s["pct_limit"] is None else f"{s['pct_limit']:.0f}%"), s["implementation"])
                      for s in steps]
    return [list(map(str, row)) for row in table]


BUSY_THRESHOLD = 0.25  # cores other processes may use before the run is called busy


def load_line(meta: dict) -> str:
    """What else ran on the machine during the bench (timing.OtherLoad), and what it means."""
    other = meta.get("other_load_cores")
    if other is None:
        return "load from other processes: not measured (no /proc/stat)"
    line = f"other processes kept {other:.2f} of {meta.get('cores', '?')} cores busy on average during this run"
    if other > BUSY_THRESHOLD:
        line += ": the machine was shared, so these figures are low and noisy; rerun on an idle machine for a verdict"
    return line


def console(results: list[dict], rows_: list[dict], meta: dict | None = None) -> str:
    table = [HEADER] + [_fmt_row(r) for r in rows_]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(HEADER) - 1)]
    lines = [f"{load_line(meta)}; allocator: {meta.get('malloc', 'retain')}"] if meta else []
    lines += ["memory bandwidth (measured in each backend's process):"]
    lines += ["  " + s for s in _bandwidth_lines(results)]
    limits = _limit_lines(results)
    if limits:
        lines += ["each workload's limit (the same bytes streamed in the same cache state, measured here):"]
        lines += ["  " + s for s in limits]
    lines.append("")
    for row in table:
        lines.append("  ".join(str(c).ljust(widths[i]) if i < len(widths) else str(c) for i, c in enumerate(row)))
    lines += ["", "* = the backend's declared fastest mode (the bar takes the fastest measured mode with the check on); "
              "GB/s counts the least bytes in conformance/bench/workloads.py; % limit divides it by the row's own "
              "limit; threads = process CPU time / wall time; faults/call = minor page faults per timed call", ""]
    steps = decode_steps(rows_)
    if steps:
        lines += ["decode step (embedding + tied head, B=1, T=1: what each generated token pays), fastest first:"]
        step_table = _step_lines(steps)
        w = [max(len(r[i]) for r in step_table) for i in range(len(step_table[0]))]
        lines += ["  " + "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in step_table]
        lines.append("")
    for title, section in _bar_section(results, rows_, meta):
        lines += [title + ":"] + ["  " + s for s in section]
    return "\n".join(lines)


def markdown(results: list[dict], rows_: list[dict], meta: dict) -> str:
    out = [f"# gpt2-conformance bench ({meta.get('device', 'cpu')}{', quick' if meta.get('quick') else ''})", "",
           f"{meta.get('datetime', '')}, {meta.get('cores', '?')} cores, wall time {meta.get('wall_s', 0):.0f} s; "
           f"{load_line(meta)}; allocator: {meta.get('malloc', 'retain')}", "",
           "## Memory bandwidth and each workload's limit", ""]
    out += ["- " + s for s in _bandwidth_lines(results)]
    out += ["", "A row's limit is a streaming reference (copy, plus a read-only or write-only pass) moving the same "
            "bytes as the workload must, in the same cache state (warm: repeated; cold: caches emptied before each "
            "round), measured in the same process (conformance/bench/bandwidth.py `matched`):", ""]
    out += ["- " + s for s in _limit_lines(results)]
    for title, section in _bar_section(results, rows_, meta):
        out += ["", f"## {title[0].upper()}{title[1:]}", ""] + ["- " + s for s in section]
    steps = decode_steps(rows_)
    if steps:
        table = _step_lines(steps)
        out += ["", "## Decode step (embedding + tied head at B=1, T=1)", "",
                "What each generated token pays for the embedding and the tied head, in one call; the embedding and "
                "the head as timed apart beside it. Fastest first.", "",
                "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table[1:]]
        if meta.get("step_png"):
            out += ["", f"![decode step]({meta['step_png']})"]
    out += ["", "## Results", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows_:
        out.append("| " + " | ".join(str(c).replace("|", "/") for c in _fmt_row(r)) + " |")
    out += ["", "`*` marks the backend's declared fastest mode; the bar takes the fastest measured mode with the "
            "check on. GB/s counts the least bytes each workload must move (conformance/bench/workloads.py); % limit "
            "divides it by the row's own limit; MODEL ERROR marks a row above 100% of it. "
            "threads = process CPU time / wall time over the steady state; faults/call = minor page faults per timed call "
            "(a fresh output whose pages the allocator gave back to the OS faults in anew: see `bench --malloc system`).",
            "", "## Modes", ""]
    for res in results:
        for mode, desc in res.get("modes", {}).items():
            out.append(f"- {res['backend']} `{mode}`: {desc}")
    return "\n".join(out) + "\n"


# -- JSON -------------------------------------------------------------------------------
def _machine_info() -> dict:
    try:
        from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info

        return pytest_benchmark_generate_machine_info()
    except Exception:  # noqa: BLE001 - py-cpuinfo missing or failing: the plain platform facts
        return {"node": platform.node(), "machine": platform.machine(), "system": platform.system(),
                "python_version": platform.python_version(), "python_implementation": platform.python_implementation(),
                "cpu": {}}


def _commit_info(root: str) -> dict:
    """HEAD read from .git's files (no git command: this must never touch the index)."""
    info = {"id": "unversioned", "time": None, "author_time": None, "dirty": None, "project": "gpt2-conformance",
            "branch": "(unknown)"}
    try:
        head = open(os.path.join(root, ".git", "HEAD")).read().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            info["branch"] = ref.removeprefix("refs/heads/")
            path = os.path.join(root, ".git", ref)
            if os.path.exists(path):
                info["id"] = open(path).read().strip()
            else:
                for line in open(os.path.join(root, ".git", "packed-refs")):
                    if line.strip().endswith(" " + ref):
                        info["id"] = line.split()[0]
        else:
            info["id"] = head
    except OSError:
        pass
    return info


def _stats_of(r: dict) -> dict:
    from gpt2_conformance.bench.stats import summary

    return {**(r.get("stats") or summary(r["samples"])), "data": r["samples"], "iterations": 1}


def _pytest_benchmark_version() -> str:
    """The installed pytest-benchmark's version (its loader reads the field), without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-benchmark")
    except PackageNotFoundError:
        return "5.1.0"  # the layout written here is 5.x's


def row_fields(r: dict) -> dict:
    """The explicit per-row fields of extra_info (one name each, read by the scoreboard)."""
    w = r["workload"]
    return {"backend": r["backend"], "implementation": r.get("implementation", ""), "mode": r["mode"],
            "workload": w.name, "kind": w.kind, "phase": w.phase, "shape": w.shape_id, "batch": w.batch,
            "seq": w.seq, "n_embd": w.n_embd, "past_length": w.past_length, "dtype": w.dtype, "cache": w.cache,
            "device": r["device"], "median_s": r["stats"]["median"], "bytes_moved": r["bytes"],
            "distinct_ids": r.get("distinct_ids"), "gbps": r["gbps"], "limit_gbps": r["limit_gbps"],
            "limit_kind": r.get("limit_kind", ""), "pct_of_limit": r.get("pct_limit"),
            "model_error": r.get("model_error")}


def benchmark_json(results: list[dict], rows_: list[dict], meta: dict) -> dict:
    benches = []
    for r in rows_:
        if r.get("error") or "samples" not in r:
            continue
        w = r["workload"]
        params = {"backend": r["backend"], "mode": r["mode"], "device": r["device"]}
        extra = {"check": r.get("check", ""), "mode_description": r.get("mode_description", "")}
        if w is not None:
            params.update(batch=w.batch, seq=w.seq, n_embd=w.n_embd, past_length=w.past_length, dtype=w.dtype,
                          cache=w.cache)
            extra.update(row_fields(r))
            extra.update(gflops=r["gflops"], first_call_s=r["first_call_s"], threads_used=r["threads"],
                         minor_faults_per_call=r.get("faults"), fastest_mode=r["is_fastest_mode"],
                         suite_mode=r["is_suite_mode"])
        else:
            extra["verdict"] = r.get("verdict", "")
        benches.append({"group": r["group"], "name": r["name"], "fullname": r["fullname"], "params": params,
                        "param": r["param"], "extra_info": extra,
                        "options": {"disable_gc": False, "timer": "perf_counter", "min_rounds": 1, "max_time": 0,
                                    "min_time": 0, "warmup": True},
                        "stats": _stats_of(r)})
    machine = _machine_info()  # kept exactly as pytest-benchmark writes it (it warns when these differ)
    bench_info = {
        "device": meta.get("device"), "quick": meta.get("quick"), "other_load_cores": meta.get("other_load_cores"),
        "malloc": meta.get("malloc", "retain"),
        "bandwidth": {res["backend"]: res.get("bandwidth") for res in results},
        "threads_setting": {res["backend"]: res.get("threads_setting") for res in results},
        "skipped": {res["backend"]: res["skipped"] for res in results if res.get("skipped")},
        "cache": {res["backend"]: res.get("cache") for res in results if res.get("cache")},
        "limits": {res["backend"]: res.get("limits") for res in results if res.get("limits")},
        "implementation": {res["backend"]: res.get("implementation") for res in results},
        "bar": bar(rows_), "cold": bar(rows_, "cold"), "model_errors": model_errors(rows_),
        "decode_step": decode_steps(rows_)}
    return {"machine_info": machine, "commit_info": _commit_info(meta.get("root", ".")), "benchmarks": benches,
            "datetime": meta.get("datetime") or _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "version": _pytest_benchmark_version(), "gpt2_conformance_bench": bench_info}


# -- PNG --------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(results: list[dict], rows_: list[dict], path: str) -> str | None:
    """Every timed row's % of its own limit, one panel per workload kind, with the 2/3 and 90%
    lines; rows flagged as model errors are left out (the title counts them). None (and no
    file) when no row has a percentage. Raises ImportError without matplotlib."""
    plt = _pyplot()
    timed = [r for r in rows_ if r.get("workload") is not None and "pct_limit" in r]
    kinds = [k for k in wl.KINDS if any(r["workload"].kind == k for r in timed)]
    if not kinds:
        return None
    series = sorted({(r["backend"], r["mode"]) for r in timed},
                    key=lambda s: (backend_order().index(s[0]) if s[0] in backend_order() else 99, s))
    cmaps = {"numpy": plt.cm.Greys, "torch": plt.cm.Oranges, "tensorflow": plt.cm.Blues, "jax": plt.cm.Greens}
    others = [plt.cm.Purples, plt.cm.Reds, plt.cm.YlOrBr, plt.cm.BuGn, plt.cm.RdPu, plt.cm.PuBu, plt.cm.Greys]
    colors = {}
    for i, b in enumerate(dict.fromkeys(s[0] for s in series)):  # one hue per backend, one shade per mode
        modes = [s for s in series if s[0] == b]
        cmap = cmaps.get(b, others[i % len(others)])
        for k, s in enumerate(modes):
            colors[s] = cmap(0.85 - 0.5 * k / max(len(modes), 2))
    fig, axes = plt.subplots(len(kinds), 1, figsize=(max(10, 1.2 * len(timed) / len(kinds)), 4.2 * len(kinds)),
                             squeeze=False)
    flagged = len(model_errors(rows_))
    for ax, kind in zip(axes[:, 0], kinds):
        groups = list(dict.fromkeys(r["group"] for r in timed if r["workload"].kind == kind))
        present = [s for s in series if any(r["workload"].kind == kind and (r["backend"], r["mode"]) == s for r in timed)]
        width = 0.8 / max(len(present), 1)
        for j, s in enumerate(present):
            xs, ys = [], []
            for i, g in enumerate(groups):
                for r in timed:
                    if r["group"] == g and (r["backend"], r["mode"]) == s:
                        xs.append(i + (j - (len(present) - 1) / 2) * width)
                        ys.append(r["pct_limit"])
            ax.bar(xs, ys, width, label=f"{s[0]} {s[1]}", color=colors[s])
        ax.axhline(100 * wl.BAR_FRACTION, color="r", ls=":", lw=1, label="2/3 of the limit")
        ax.axhline(100 * wl.BEST_FRACTION, color="k", ls="--", lw=1, label=f"{100 * wl.BEST_FRACTION:.0f}%")
        ax.set_ylim(0, 100)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g.split(" ", 1)[1] + "\n" + g.split(" ", 1)[0] for g in groups], fontsize=8)
        ax.set_ylabel("% of the row's limit")
        ax.set_title(f"{kind}: least bytes moved / time, as % of the same bytes streamed in the same cache state"
                     + (f" ({flagged} rows above 100% omitted: model errors)" if flagged else ""), fontsize=9)
        ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_decode_step(rows_: list[dict], path: str) -> str | None:
    """The decode-step table as horizontal bars (ms per generated token, log scale), the
    embedding and the head stacked where both were timed apart. None when no step was timed.
    Raises ImportError without matplotlib."""
    steps = decode_steps(rows_)
    if not steps:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(steps) + 1.6))
    labels = [f"{s['backend']} {s['mode']}" for s in steps]
    ys = range(len(steps))
    ax.barh(ys, [s["median_ms"] for s in steps], color="tab:blue", label="step (one call)")
    for y, s in zip(ys, steps):
        ax.text(s["median_ms"], y, f" {s['median_ms']:.2f} ms", va="center", fontsize=8)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ms per generated token (embedding + tied head, B=1, T=1), log scale; lower is better")
    ax.set_title(f"decode step at {steps[0]['shape']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_all(results: list[dict], rows_: list[dict], meta: dict, out_dir: str, say=print) -> dict[str, str]:
    """Writes every output on its own: {kind: path} of those written. One that fails (a missing
    optional package, a full disk) costs that output and one line through say(), never the
    others; the raw results (bench-results.json: the children's figures) go first, with no
    dependency beyond the standard library."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}

    def attempt(kind: str, path: str, write) -> None:
        try:
            if write(path) is not None:
                paths[kind] = path
        except ImportError as exc:
            say(f"bench: no {os.path.basename(path)}: {exc} (pip install matplotlib for the plots); "
                "the other outputs are written")
        except Exception as exc:  # noqa: BLE001 - one output's failure never costs the others
            say(f"bench: no {os.path.basename(path)}: {type(exc).__name__}: {exc}; the other outputs are written")

    def text(make):
        def write(path):
            content = make()
            with open(path, "w") as f:
                f.write(content)
            return path
        return write

    attempt("raw", os.path.join(out_dir, "bench-results.json"),
            text(lambda: json.dumps({"meta": meta, "results": results}, indent=1, default=str)))
    attempt("json", os.path.join(out_dir, "bench.json"),
            text(lambda: json.dumps(benchmark_json(results, rows_, meta), indent=2)))
    attempt("step_png", os.path.join(out_dir, "bench-decode-step.png"), lambda p: plot_decode_step(rows_, p))
    if "step_png" in paths:
        meta = dict(meta, step_png=os.path.basename(paths["step_png"]))
    attempt("markdown", os.path.join(out_dir, "bench.md"), text(lambda: markdown(results, rows_, meta)))
    attempt("png", os.path.join(out_dir, "bench.png"), lambda p: plot(results, rows_, p))
    return paths
