"""The regression gate (`bench --compare BASELINE.json --fail-above PCT`): a 20% slower median
fails at 10 and passes at 30, faster is never a regression, unmatched workloads are listed."""

from __future__ import annotations

import pytest

from gpt2_conformance.bench import compare
from helpers.bench_results import child_result, write_outputs


def test_gate_fails_a_20_percent_regression_at_10_and_passes_it_at_30(tmp_path):
    _, base = write_outputs(tmp_path, [child_result(median=0.010)], "base")
    _, now = write_outputs(tmp_path, [child_result(median=0.012)], "now")
    baseline, current = compare.load(base["json"]), compare.load(now["json"])
    regressions, changes, missing, new = compare.compare(baseline, current, 10)
    assert [c.pct for c in regressions] == [pytest.approx(20.0)]
    assert "REGRESSED" in compare.report(regressions, changes, missing, new, 10)
    assert "test_forward_prefill[numpy-suite-B8-T1024-d768]" in compare.report(regressions, changes, missing, new, 10)
    assert compare.compare(baseline, current, 30)[0] == []
    assert compare.compare(current, baseline, 10)[0] == []  # faster is never a regression


def test_gate_lists_unmatched_workloads_without_failing():
    regressions, changes, missing, new = compare.compare({"a::x": 1.0}, {"a::y": 5.0}, 10)
    assert regressions == [] and changes == [] and missing == ["x"] and new == ["y"]
