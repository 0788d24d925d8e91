"""The four outputs of a bench run: console table, pytest-benchmark JSON, Markdown, PNG.

A "row" is one timed (backend, mode, workload) with its stats and derived figures; rows()
builds them from the children's results. The JSON is pytest-benchmark's own layout
(machine_info, commit_info, benchmarks[{group, name, fullname, params, param, extra_info,
options, stats{min, max, mean, stddev, rounds, median, iqr, q1, q3, ..., ops, total, data}}],
datetime, version), so `pytest-benchmark compare` and `--benchmark-compare` read it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics

from conformance.bench import workloads as wl

BACKEND_ORDER = ("numpy", "torch", "tensorflow", "jax")
FRAMEWORKS = ("torch", "tensorflow", "jax")  # the backends the 2/3 bar applies to
# names and fullnames are those of the pytest-benchmark suite's tests, so a `bench` JSON and a
# `pytest tests/benchmarks --run-bench --benchmark-json` JSON compare with each other
SUITE_FILE = "tests/benchmarks/test_embedding_speed.py"


def _limit(result: dict) -> float:
    return result.get("bandwidth", {}).get("copy_gbps", float("nan"))


def rows(results: list[dict]) -> list[dict]:
    """One dict per timed record, with name/fullname/group as pytest-benchmark has them."""
    out = []
    for res in results:
        limit = _limit(res)
        for rec in res.get("records", []):
            if "workload" not in rec:
                continue
            w = wl.Workload(**rec["workload"])
            backend, mode = res["backend"], rec["mode"]
            param = f"{backend}-{mode}-{w.shape_id}"
            row = {"backend": backend, "mode": mode, "device": res["device"], "workload": w,
                   "name": f"test_{w.name}[{param}]", "fullname": f"{SUITE_FILE}::test_{w.name}[{param}]",
                   "group": f"{w.name} {w.shape_id}", "param": param,
                   "check": res.get("check", {}).get(mode, ""), "limit_gbps": limit,
                   "mode_description": res.get("modes", {}).get(mode, ""),
                   "is_suite_mode": mode == res.get("suite_mode"), "is_fastest_mode": mode == res.get("fastest_mode"),
                   "error": rec.get("error")}
            if "stats" in rec:
                med = rec["stats"]["median"]
                nbytes = wl.bytes_moved(w)
                row.update(stats=rec["stats"], samples=rec["samples"], first_call_s=rec["first_call_s"],
                           threads=round(rec["cpu_ratio"], 2), faults=rec.get("faults_per_call"), bytes=nbytes,
                           gbps=nbytes / med / 1e9, pct_limit=100 * nbytes / med / 1e9 / limit,
                           gflops=wl.flops(w) / med / 1e9)
            out.append(row)
    order = {b: i for i, b in enumerate(BACKEND_ORDER)}
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
    the rows whose workload at_shape(workload) accepts."""
    best = {}
    for r in rows_:
        w = r["workload"]
        if w is None or not at_shape(w) or "pct_limit" not in r or not r["check"].startswith("on"):
            continue  # only modes whose bounds check is on count
        if r["backend"] not in best or r["pct_limit"] > best[r["backend"]]["pct_limit"]:
            best[r["backend"]] = r
    return best


def bar(rows_: list[dict]) -> dict:
    """Issue 6's bar at B=8, T=1024, d=768: each framework's fastest measured mode with its
    bounds check on >= 2/3 of the measured limit, the best one >= 85%.
    {backend: {mode, pct, meets, ...}} plus "best"."""
    verdict = {}
    for backend, r in _fastest_checked(rows_, lambda w: w.is_bar_shape).items():
        verdict[backend] = {"mode": r["mode"], "pct": r["pct_limit"], "check": r["check"],
                            "median_ms": r["stats"]["median"] * 1e3, "declared_fastest": r["is_fastest_mode"],
                            "meets": backend not in FRAMEWORKS or r["pct_limit"] >= 100 * wl.BAR_FRACTION}
    frameworks = {b: v for b, v in verdict.items() if b in FRAMEWORKS}
    if frameworks:
        best = max(frameworks, key=lambda b: frameworks[b]["pct"])
        verdict["best"] = {"backend": best, "pct": frameworks[best]["pct"],
                           "meets": frameworks[best]["pct"] >= 100 * wl.BEST_FRACTION}
    return verdict


def cold_bar(results: list[dict], rows_: list[dict]) -> dict:
    """The bar shape with the caches emptied before each call (a finding beside the bar, not
    the bar): per backend its fastest cold mode with the check on, against the limit and
    against a cold copy of h's bytes measured in the same process."""
    cold_copy = {res["backend"]: res.get("cache", {}).get("cold_copy", {}) for res in results}
    out = {}
    for backend, r in _fastest_checked(rows_, lambda w: w.is_cold_bar_shape).items():
        ref = cold_copy.get(backend, {}).get(r["workload"].shape_id)
        out[backend] = {"mode": r["mode"], "pct": r["pct_limit"], "median_ms": r["stats"]["median"] * 1e3,
                        "gbps": r["gbps"], "cold_copy_gbps": ref["gbps"] if ref else None,
                        "pct_of_cold_copy": 100 * r["gbps"] / ref["gbps"] if ref else None}
    return out


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
            f"{r['gbps']:.1f}", f"{r['pct_limit']:.0f}%", f"{r['gflops']:.1f}", f"{r['first_call_s'] * 1e3:.0f}",
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
        cold = "".join(f"; cold copy of {c['bytes'] / 2**20:.0f} MiB {c['gbps']:.1f} GB/s "
                       f"[{c['gbps_min']:.1f}..{c['gbps_max']:.1f}]" for c in cache.get("cold_copy", {}).values())
        llc = (f"; LLC {cache['llc_bytes'] / 2**20:.0f} MiB" if cache.get("llc_bytes") else "")
        flush = f"; cold = {cache['flush']}" if cache.get("flush") else ""
        lines.append(f"{res['backend']} ({res['device']}): limit (copy) {bw['copy_gbps']:.1f} GB/s "
                     f"[{bw['copy_gbps_min']:.1f}..{bw['copy_gbps_max']:.1f}]{one}, "
                     f"row gather {bw['gather_gbps']:.1f} GB/s "
                     f"[{bw['gather_gbps_min']:.1f}..{bw['gather_gbps_max']:.1f}] over {bw['bytes'] / 2**20:.0f} MiB"
                     f"{cold}{llc}{flush}; threads: {res.get('threads_setting', '')}; {res.get('cores', '?')} cores; "
                     f"import {res.get('import_s', 0):.1f} s")
    return lines


def _cold_lines(cold: dict) -> list[str]:
    lines = []
    for b in BACKEND_ORDER:
        if b in cold:
            v = cold[b]
            ref = (f"; {v['pct_of_cold_copy']:.0f}% of a cold copy of h's bytes ({v['cold_copy_gbps']:.1f} GB/s)"
                   if v["cold_copy_gbps"] else "")
            lines.append(f"{b}: {v['mode']} {v['median_ms']:.2f} ms, {v['gbps']:.1f} GB/s, {v['pct']:.0f}% of the limit{ref}")
    return lines


def _bar_lines(verdict: dict) -> list[str]:
    lines = []
    for b in BACKEND_ORDER:
        if b in verdict:
            v = verdict[b]
            need = "" if b not in FRAMEWORKS else (" meets the 2/3 bar" if v["meets"] else " BELOW the 2/3 bar")
            lines.append(f"{b}: fastest measured mode with the check on: {v['mode']} ({v['check']}) "
                         f"{v['median_ms']:.2f} ms, {v['pct']:.0f}% of the limit{need}")
    if "best" in verdict:
        v = verdict["best"]
        lines.append(f"best framework: {v['backend']} {v['pct']:.0f}% "
                     f"({'meets' if v['meets'] else 'BELOW'} the 85% bar)")
    return lines


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
    lines.append("")
    for row in table:
        lines.append("  ".join(str(c).ljust(widths[i]) if i < len(widths) else str(c) for i, c in enumerate(row)))
    lines += ["", "* = the backend's declared fastest mode (the bar takes the fastest measured mode with the check on); GB/s and % limit use the bytes "
              "in conformance/bench/workloads.py; threads = process CPU time / wall time; faults/call = minor page faults per timed call", ""]
    lines += ["bar at forward_prefill B8-T1024-d768:"] + ["  " + s for s in _bar_lines(bar(rows_))]
    cold = _cold_lines(cold_bar(results, rows_))
    if cold:
        lines += ["the same shape with the caches emptied before each call (fastest mode, check on):"]
        lines += ["  " + s for s in cold]
    return "\n".join(lines)


def markdown(results: list[dict], rows_: list[dict], meta: dict) -> str:
    out = [f"# gpt2-conformance bench ({meta.get('device', 'cpu')}{', quick' if meta.get('quick') else ''})", "",
           f"{meta.get('datetime', '')}, {meta.get('cores', '?')} cores, wall time {meta.get('wall_s', 0):.0f} s; "
           f"{load_line(meta)}; allocator: {meta.get('malloc', 'retain')}", "",
           "## Memory bandwidth (the limit)", ""]
    out += ["- " + s for s in _bandwidth_lines(results)]
    out += ["", "## Bar at forward_prefill B=8, T=1024, d=768 (fastest mode, bounds check on)", ""]
    out += ["- " + s for s in _bar_lines(bar(rows_))]
    cold = _cold_lines(cold_bar(results, rows_))
    if cold:
        out += ["", "## The same shape, cold (caches emptied before each timed call)", "",
                "Warm rows repeat one call, so a working set smaller than the last-level cache is read from "
                "cache; cold rows are what a forward pass inside a model sees (conformance/bench/cache.py). "
                "Fastest mode with the check on:", ""]
        out += ["- " + s for s in cold]
    out += ["", "## Results", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows_:
        out.append("| " + " | ".join(str(c).replace("|", "/") for c in _fmt_row(r)) + " |")
    out += ["", "`*` marks the backend's declared fastest mode; the bar takes the fastest measured mode with the check on. Bytes per workload: see conformance/bench/workloads.py. "
            "threads = process CPU time / wall time over the steady state; faults/call = minor page faults per timed call "
            "(a fresh output whose pages the allocator gave back to the OS faults in anew: see `bench --malloc system`).", "", "## Modes", ""]
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
    if "stats" in r:
        return {**r["stats"], "data": r["samples"], "iterations": 1}
    from pytest_benchmark.stats import Stats

    st = Stats()
    for s in r["samples"]:
        st.update(s)
    return {**st.as_dict(), "data": r["samples"], "iterations": 1}


def benchmark_json(results: list[dict], rows_: list[dict], meta: dict) -> dict:
    import pytest_benchmark

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
            extra.update(bytes_moved=r["bytes"], gbps=r["gbps"], pct_of_limit=r["pct_limit"],
                         limit_gbps=r["limit_gbps"], gflops=r["gflops"], first_call_s=r["first_call_s"],
                         threads_used=r["threads"], minor_faults_per_call=r.get("faults"), fastest_mode=r["is_fastest_mode"], suite_mode=r["is_suite_mode"])
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
        "bar": bar(rows_), "cold": cold_bar(results, rows_)}
    return {"machine_info": machine, "commit_info": _commit_info(meta.get("root", ".")), "benchmarks": benches,
            "datetime": meta.get("datetime") or _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "version": pytest_benchmark.__version__, "gpt2_conformance_bench": bench_info}


# -- PNG --------------------------------------------------------------------------------
def plot(results: list[dict], rows_: list[dict], path: str) -> str | None:
    """Backends side by side (GB/s) per workload, one panel per kind, against the measured
    copy limit (dashed) and row-gather rate (dotted). None (and no file) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    timed = [r for r in rows_ if r.get("workload") is not None and "gbps" in r]
    kinds = [k for k in wl.KINDS if any(r["workload"].kind == k for r in timed)]
    if not kinds:
        return None
    limits = [res["bandwidth"]["copy_gbps"] for res in results if res.get("bandwidth")]
    gathers = [res["bandwidth"]["gather_gbps"] for res in results if res.get("bandwidth")]
    series = sorted({(r["backend"], r["mode"]) for r in timed},
                    key=lambda s: (BACKEND_ORDER.index(s[0]) if s[0] in BACKEND_ORDER else 99, s[1]))
    cmaps = {"numpy": plt.cm.Greys, "torch": plt.cm.Oranges, "tensorflow": plt.cm.Blues, "jax": plt.cm.Greens}
    colors = {}
    for b in {s[0] for s in series}:  # one hue per backend, one shade per mode
        modes = [s for s in series if s[0] == b]
        for k, s in enumerate(modes):
            colors[s] = cmaps.get(b, plt.cm.Purples)(0.85 - 0.5 * k / max(len(modes), 2))
    fig, axes = plt.subplots(len(kinds), 1, figsize=(max(10, 1.2 * len(timed) / len(kinds)), 4.2 * len(kinds)),
                             squeeze=False)
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
                        ys.append(r["gbps"])
            ax.bar(xs, ys, width, label=f"{s[0]} {s[1]}", color=colors[s])
        if limits:
            ax.axhline(statistics.median(limits), color="k", ls="--", lw=1,
                       label=f"measured limit (copy) {statistics.median(limits):.1f} GB/s")
            ax.axhline(statistics.median(limits) * wl.BAR_FRACTION, color="r", ls=":", lw=1, label="2/3 of the limit")
        if gathers:
            ax.axhline(statistics.median(gathers), color="gray", ls="-.", lw=1,
                       label=f"numpy row gather {statistics.median(gathers):.1f} GB/s")
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g.split(" ", 1)[1] + "\n" + g.split(" ", 1)[0] for g in groups], fontsize=8)
        ax.set_ylabel("GB/s moved")
        ax.set_title(f"{kind}: GB/s (bytes in conformance/bench/workloads.py), higher is better")
        ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_all(results: list[dict], rows_: list[dict], meta: dict, out_dir: str) -> dict[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = {"json": os.path.join(out_dir, "bench.json"), "markdown": os.path.join(out_dir, "bench.md"),
             "png": os.path.join(out_dir, "bench.png")}
    with open(paths["json"], "w") as f:
        json.dump(benchmark_json(results, rows_, meta), f, indent=2)
    with open(paths["markdown"], "w") as f:
        f.write(markdown(results, rows_, meta))
    if plot(results, rows_, paths["png"]) is None:
        paths.pop("png")
    return paths
