"""Fake inputs for `merge` and the scoreboard, made by the real writers: a conformance report
from a SuiteResult (gpt2_conformance.run.report.to_json) and a bench JSON in pytest-benchmark's
layout (gpt2_conformance.bench.benchmark_json)."""

from __future__ import annotations

import json

import pytest

from gpt2_conformance import results as res
from gpt2_conformance import spec
from gpt2_conformance.run import report

WAIVER_LINK = "https://github.com/o/r/blob/v1/x.py#L9"  # the source link of every waived clause below


def suite_result(
    backend="numpy", device="cpu", statuses=None, environment=None, fp=None, spec_version=None, drop=()
) -> res.SuiteResult:
    """A SuiteResult with every clause PASS except those in `statuses` {clause id: status}."""
    statuses = statuses or {}
    clauses = []
    for c in spec.CLAUSES:
        if c.id in drop:
            continue
        status = statuses.get(c.id, res.PASS)
        waiver = {"reason": "init std 0.02", "link": WAIVER_LINK} if status == res.WAIVED else {}
        message = "" if status == res.PASS else f"{c.id} went wrong"
        clauses.append(res.ClauseResult(c, status, message, [], waiver))
    env = {"python": "3.11", "golden_data": "shipped fixtures"} | (environment or {})
    return res.SuiteResult(
        backend,
        device,
        spec_version or spec.SPEC_VERSION,
        clauses,
        1.0,
        env,
        parity=fp or {},
        created="2026-11-30T10:00:00+00:00",
    )


def write(tmp_path, name, result_or_dict) -> str:
    """Write a SuiteResult as its JSON report (or a dict as JSON) to tmp_path/name; its path."""
    path = tmp_path / name
    text = report.to_json(result_or_dict) if isinstance(result_or_dict, res.SuiteResult) else json.dumps(result_or_dict)
    path.write_text(text)
    return str(path)


def bench_json(backend="numpy", median=0.004, node="host-a") -> dict:
    """A bench JSON in the real layout: gpt2_conformance.bench.benchmark_json itself, over rows
    made by the real summary from made-up rounds (helpers.bench_results)."""
    pytest.importorskip("pytest_benchmark")
    from gpt2_conformance.bench import workloads as wl
    from gpt2_conformance.bench.benchmark_json import BenchmarkJSON
    from helpers.bench_results import META, table

    tables = [
        table({backend: median}, w, limit=2 * median)
        for w in (wl.standard("forward_prefill"), wl.standard("forward_decode"))
    ]
    doc = BenchmarkJSON().render(tables, META)
    doc["machine_info"]["node"] = node
    return doc
