"""Rows timed in several fresh processes (conformance/bench/processes.py): one combined row per
(mode, workload) with every process's median, the limit their median, a failure or skip in any
process kept; the bar names a best framework only when every process of it beats every process of
the runner-up."""

from __future__ import annotations

import pytest

from gpt2_conformance.bench import processes, table
from gpt2_conformance.bench.verdict import bar, workload_rows
from helpers.bench_results import BAR_BYTES, child_result


def test_processes_combine_into_one_row_with_each_process_median():
    runs = [child_result("torch", median=m, limit=lim) for m, lim in ((0.010, 17.0), (0.012, 18.0), (0.011, 30.0))]
    combined = processes.combine(runs)
    (rec,) = combined["records"]
    assert rec["process_medians"] == pytest.approx([0.010, 0.012, 0.011])
    assert len(rec["samples"]) == 15 and rec["stats"]["rounds"] == 15
    assert rec["stats"]["median"] == pytest.approx(0.011)
    (lim,) = combined["limits"].values()
    assert lim["gbps"] == 18.0 and lim["process_gbps"] == [17.0, 18.0, 30.0]  # the median, not the lucky one
    (row,) = workload_rows([combined])
    assert row["process_spread_pct"] == pytest.approx(100 * 0.002 / 0.011)
    assert processes.combine(runs[:1]) is runs[0]


def test_a_failed_or_skipped_process_is_never_averaged_away():
    good = child_result("jax", median=0.01)
    failed = dict(child_result("jax"), error="child exited with -6")
    assert processes.combine([good, failed, good])["error"] == "process 2 of 3: child exited with -6"
    skipped = dict(child_result("jax"), skipped="no GPU", records=[])
    assert processes.combine([good, skipped])["skipped"] == "no GPU"
    broken = child_result("jax", median=0.01)
    broken["records"] = [{k: v for k, v in broken["records"][0].items() if k not in ("stats", "samples")}
                         | {"error": "RuntimeError: boom"}]
    (rec,) = processes.combine([good, broken])["records"]
    assert rec["error"] == "RuntimeError: boom" and "stats" not in rec


def _framework(backend, process_pcts):
    """A backend's bar row from processes at these % of an 18 GB/s limit."""
    return processes.combine([child_result(backend, median=BAR_BYTES / 18e9 / (p / 100)) for p in process_pcts])


def test_the_best_framework_is_named_only_beyond_the_spread():
    clear = bar(workload_rows([_framework("torch", (60, 62, 61)), _framework("jax", (70, 72, 71))]))
    assert clear["best"]["backend"] == "jax" and clear["best"]["ranked"]
    assert clear["jax"]["pct_range"] == pytest.approx((70, 72))
    close = bar(workload_rows([_framework("torch", (60, 75, 61)), _framework("jax", (70, 72, 71))]))
    assert close["best"]["backend"] == "jax" and not close["best"]["ranked"]
    assert "jax's slowest process (70%) is not above torch's fastest (75%)" in close["best"]["why"]
    results = [_framework("torch", (60, 75, 61)), _framework("jax", (70, 72, 71))]
    text = table.ConsoleTable().render(results, workload_rows(results), {"cores": 2, "other_load_cores": 0.0})
    assert "best framework: NOT RANKED: jax's slowest process" in text
    assert "71% of the limit (70..72% over its processes)" in text


def _paired_framework(backend, process_pcts, paired_pcts):
    """_framework, each process also timed round by round beside its stream at `paired_pcts`."""
    runs = [child_result(backend, median=BAR_BYTES / 18e9 / (p / 100)) for p in process_pcts]
    for run, paired in zip(runs, paired_pcts):
        run["records"][0]["paired"] = {"pct": paired, "rounds": 9}
    return processes.combine(runs)


def test_frameworks_are_ranked_by_their_paired_pct_where_every_one_has_it():
    """The paired % (a row against its stream timed round by round beside it) holds where the %
    of a limit timed apart does not: it ranks, while the bar stays judged on the % of the limit."""
    results = [_paired_framework("torch", (60, 75, 61), (80, 81, 80)), _paired_framework("jax", (70, 72, 71),
                                                                                         (60, 61, 62))]
    verdict = bar(workload_rows(results))
    assert verdict["torch"]["paired_pct"] == 80 and verdict["torch"]["paired_range"] == (80, 81)
    assert verdict["best"]["backend"] == "torch" and verdict["best"]["ranked"], verdict["best"]
    assert verdict["best"]["pct"] == pytest.approx(61) and not verdict["best"]["meets"]
    text = table.ConsoleTable().render(results, workload_rows(results), {"cores": 2, "other_load_cores": 0.0})
    assert "best framework: torch 61% of the limit, paired 80% (BELOW the 90% bar)" in text, text
    assert "paired with its stream 61% (60..62%)" in text
    close = bar(workload_rows([_paired_framework("torch", (60, 75, 61), (70, 75, 71)),
                               _paired_framework("jax", (70, 72, 71), (72, 74, 73))]))
    assert not close["best"]["ranked"] and "(paired 72%) is not above torch's fastest (paired 75%)" in close["best"]["why"]
    mixed = bar(workload_rows([_paired_framework("torch", (60, 62, 61), (90, 90, 90)), _framework("jax", (70, 72, 71))]))
    assert mixed["best"]["backend"] == "jax" and mixed["best"]["ranked_by"] == "pct"  # one without: the % of the limit


def test_each_frameworks_mode_at_the_bar_is_picked_by_its_paired_pct():
    """Within one framework the mode shown is the one with the highest paired % (the figure that
    holds), its % of the limit the bar's figure, even where another mode's % of the limit is higher."""
    def two_modes(pcts, paired):
        run = child_result("torch", median=BAR_BYTES / 18e9 / (pcts[0] / 100), modes=("suite", "compile"))
        run["records"][1] = dict(run["records"][1], samples=[s * pcts[0] / pcts[1] for s in run["records"][1]["samples"]])
        run["records"][1]["stats"] = dict(run["records"][1]["stats"], median=BAR_BYTES / 18e9 / (pcts[1] / 100))
        for rec, p in zip(run["records"], paired):
            rec["paired"] = {"pct": p, "rounds": 9}
        return run

    verdict = bar(workload_rows([two_modes((45, 40), (50, 70))]))
    assert verdict["torch"]["mode"] == "compile" and verdict["torch"]["pct"] == pytest.approx(40)
    assert verdict["torch"]["paired_pct"] == 70
    # a mode without a paired % is never weighed against another's paired % (that reads higher):
    # then every mode is picked by its % of the limit
    one_unpaired = two_modes((45, 40), (50, 70))
    del one_unpaired["records"][0]["paired"]
    verdict = bar(workload_rows([one_unpaired]))
    assert verdict["torch"]["mode"] == "suite" and verdict["torch"]["pct"] == pytest.approx(45), verdict["torch"]


def test_a_process_whose_pairs_failed_makes_the_row_an_error():
    """A row timed in every process whose pairs with its stream raised in one of them (its record
    then has stats and an error): the combined row is that error, never the other processes'
    figures with one process's pairs."""
    good = child_result("tensorflow", median=0.008)
    good["records"][0]["paired"] = {"pct": 55.0, "rounds": 9}
    failed = child_result("tensorflow", median=0.008)
    failed["records"][0]["error"] = "TypeError: 'NoneType' object is not iterable"
    (rec,) = processes.combine([good, failed, good])["records"]
    assert rec["error"].startswith("TypeError") and len(rec["process_medians"]) == 2
    (row,) = workload_rows([processes.combine([good, good])])
    assert row["paired_pct"] == 55.0 and row["process_paired_pcts"] == [55.0, 55.0]
