"""bench.json: the rows in pytest-benchmark's own layout (machine_info, commit_info,
benchmarks[{group, name, fullname, params, param, extra_info, options, stats{min, max, mean,
stddev, rounds, median, iqr, q1, q3, ..., ops, total, data}}], datetime, version), so
`pytest-benchmark compare` reads it; beside them "ranking" (per workload: backend, mode, ratio,
ci_low, ci_high, rank) and the run's own facts under "gpt2_conformance_bench"."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from importlib.metadata import version


def _machine_info() -> dict:
    try:
        from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info

        return pytest_benchmark_generate_machine_info()
    except Exception:  # noqa: BLE001 - py-cpuinfo missing or failing: the plain platform facts
        return {
            "node": platform.node(),
            "machine": platform.machine(),
            "system": platform.system(),
            "python_version": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            "cpu": {},
        }


def _commit_info(root: str) -> dict:
    """HEAD read from .git's files (no git command: this must never touch the index)."""
    info = {
        "id": "unversioned",
        "time": None,
        "author_time": None,
        "dirty": None,
        "project": "gpt2-conformance",
        "branch": "(unknown)",
    }
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


# names and fullnames are those of the pytest-benchmark suite's tests, so a `bench` JSON and a
# `pytest tests/benchmarks --run-bench --benchmark-json` JSON compare with each other
SUITE_FILE = "tests/benchmarks/test_embedding_speed.py"
EXTRA = (
    "backend",
    "label",
    "implementation",
    "mode",
    "workload",
    "kind",
    "phase",
    "batch",
    "seq",
    "n_embd",
    "past_length",
    "cache",
    "device",
    "check",
    "mode_description",
    "median_s",
    "block_medians",
    "ratio",
    "ci_low",
    "ci_high",
    "rank",
    "pct_of_limit",
    "pct_low",
    "pct_high",
    "limit_gbps",
    "gbps",
    "gflops",
    "bytes_moved",
    "model_error",
    "first_call_s",
    "threads_used",
    "faults_per_call",
)
RANKING = ("backend", "label", "mode", "ratio", "ci_low", "ci_high", "rank", "median_s", "pct_of_limit")


def row_name(row: dict) -> str:
    """The pytest-benchmark suite's test name for this row (its kind, phase and shape)."""
    shape = row["workload"].split(" ", 1)[1]
    return f"test_{row['kind']}_{row['phase']}[{row['label']}-{row['mode']}-{shape}]"


def summary(samples: list[float]) -> dict:
    """pytest-benchmark's own Stats fields (median, IQR, outliers, ...) of the samples."""
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for s in samples:
        stats.update(s)
    return stats.as_dict()


def _benchmark(row: dict) -> dict:
    params = {
        "backend": row["backend"],
        "mode": row["mode"],
        "device": row["device"],
        "batch": row["batch"],
        "seq": row["seq"],
        "n_embd": row["n_embd"],
        "past_length": row["past_length"],
        "cache": row["cache"],
    }
    name = row_name(row)
    return {
        "group": row["workload"],
        "name": name,
        "fullname": f"{SUITE_FILE}::{name}",
        "params": params,
        "param": name[name.index("[") + 1 : -1],
        "extra_info": {k: row.get(k) for k in EXTRA},
        "options": {
            "disable_gc": False,
            "timer": "perf_counter",
            "min_rounds": 1,
            "max_time": 0,
            "min_time": 0,
            "warmup": True,
        },
        # pytest-benchmark's meaning: each sample is the mean of `iterations` calls in a row
        "stats": {**summary(row["samples"]), "data": row["samples"], "iterations": row["calls_per_sample"]},
    }


class BenchmarkJSON:
    """bench.json: render() gives the document, write() the file."""

    filename = "bench.json"

    def render(self, tables: list[dict], meta: dict) -> dict:
        timed = [r for t in tables for r in t["rows"] if not r.get("error")]
        return {
            "machine_info": _machine_info(),
            "commit_info": _commit_info(meta.get("root", ".")),
            "benchmarks": [_benchmark(r) for r in timed],
            "datetime": meta.get("datetime") or _dt.datetime.now(_dt.UTC).isoformat(),
            "version": version("pytest-benchmark"),  # its loader reads it
            "ranking": {
                t["group"]: [{k: r.get(k) for k in RANKING} for r in t["rows"] if not r.get("error")] for t in tables
            },
            "gpt2_conformance_bench": {
                **{k: v for k, v in meta.items() if k != "root"},
                "limits": {t["group"]: t["limit"] for t in tables},
                "errors": [
                    {k: r[k] for k in ("label", "mode", "workload", "error")}
                    for t in tables
                    for r in t["rows"]
                    if r.get("error")
                ],
            },
        }

    def write(self, tables: list[dict], meta: dict, path: str) -> str:
        content = json.dumps(self.render(tables, meta), indent=2)  # made before the file is opened
        with open(path, "w") as f:
            f.write(content)
        return path
