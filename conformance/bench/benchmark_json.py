"""bench.json: the rows in pytest-benchmark's own layout (machine_info, commit_info,
benchmarks[{group, name, fullname, params, param, extra_info, options, stats{min, max, mean,
stddev, rounds, median, iqr, q1, q3, ..., ops, total, data}}], datetime, version), so
`pytest-benchmark compare` and `--benchmark-compare` read it; the bench's own figures (bars,
limits, decode step) ride along under "gpt2_conformance_bench"."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform

from gpt2_conformance.bench.verdict import bar, cold_bar, decode_steps, model_errors


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

    # pytest-benchmark's meaning: each sample is the mean of `iterations` calls in a row
    return {**(r.get("stats") or summary(r["samples"])), "data": r["samples"], "iterations": r.get("calls_per_sample", 1)}


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
            "pct_paired": r.get("paired_pct"), "process_paired_pcts": r.get("process_paired_pcts"),
            "model_error": r.get("model_error"), "process_medians_s": r.get("process_medians"),
            "process_spread_pct": r.get("process_spread_pct")}


def _benchmark(r: dict) -> dict:
    """One row as one entry of pytest-benchmark's "benchmarks"."""
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
    return {"group": r["group"], "name": r["name"], "fullname": r["fullname"], "params": params,
            "param": r["param"], "extra_info": extra,
            "options": {"disable_gc": False, "timer": "perf_counter", "min_rounds": 1, "max_time": 0,
                        "min_time": 0, "warmup": True},
            "stats": _stats_of(r)}


class BenchmarkJSON:
    """bench.json: render() gives the document, write() the file."""

    filename = "bench.json"

    def render(self, results: list[dict], rows: list[dict], meta: dict) -> dict:
        benches = [_benchmark(r) for r in rows if not r.get("error") and "samples" in r]
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
            "bar": bar(rows), "cold": cold_bar(rows), "model_errors": model_errors(rows),
            "decode_step": decode_steps(rows)}
        return {"machine_info": machine, "commit_info": _commit_info(meta.get("root", ".")), "benchmarks": benches,
                "datetime": meta.get("datetime") or _dt.datetime.now(_dt.timezone.utc).isoformat(),
                "version": _pytest_benchmark_version(), "gpt2_conformance_bench": bench_info}

    def write(self, results: list[dict], rows: list[dict], meta: dict, path: str) -> str:
        content = json.dumps(self.render(results, rows, meta), indent=2)  # before the file is opened
        with open(path, "w") as f:
            f.write(content)
        return path

