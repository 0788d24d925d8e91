"""The files a run writes: bench.json loads with pytest-benchmark's own loader and its compare
CLI, under the pytest-benchmark suite's test names; a busy machine is named; a missing optional
package or a failing output costs that output and a line, never the others; the decode-step
table and plot."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from gpt2_conformance.bench import benchmark_json, command, files, plot, table, verdict
from gpt2_conformance.bench import workloads as wl
from helpers.bench_results import bench_args, child_result, write_outputs


def test_json_loads_with_pytest_benchmarks_own_loader(tmp_path):
    from pytest_benchmark.storage.file import FileStorage

    class Logger:  # the loader reports a file it cannot read as a warning and skips it
        warnings: list = []

        def warning(self, text, *args, **kwargs):
            self.warnings.append(text)

    _, paths = write_outputs(tmp_path, [child_result(modes=("suite", "take-out"))])
    data = json.loads(open(paths["json"]).read())
    assert {"machine_info", "commit_info", "benchmarks", "datetime", "version"} <= set(data)
    b = data["benchmarks"][0]
    assert {"name", "fullname", "group", "params", "stats"} <= set(b)
    assert {"min", "max", "mean", "stddev", "median", "iqr", "ops", "rounds", "iterations"} <= set(b["stats"])
    assert b["fullname"].startswith("tests/benchmarks/test_embedding_speed.py::test_forward_prefill[")
    logger = Logger()
    storage = FileStorage(str(tmp_path), logger=logger, default_machine_id="x")
    loaded = list(storage.load_benchmarks(paths["json"]))
    assert logger.warnings == []
    assert len(loaded) == 2 and all(b["median"] > 0 for b in loaded)


def test_pytest_benchmark_compare_cli_accepts_it(tmp_path):
    _, paths = write_outputs(tmp_path, [child_result()])
    cli = [sys.executable, "-c", "import sys; from pytest_benchmark.cli import main; sys.exit(main())"]
    done = subprocess.run([*cli, "compare", paths["json"], "--columns=median,iqr"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "test_forward_prefill[numpy-suite-B8-T1024-d768]" in done.stdout


def test_rows_are_named_after_the_benchmark_suites_tests():
    """bench.json names each row as the pytest-benchmark suite names its test (verdict.SUITE_FILE),
    so a `bench` JSON and a `pytest tests/benchmarks --run-bench` JSON compare: every --quick row
    of every backend with its own hooks is one of the suite's tests, under the same fullname."""
    path = pathlib.Path(command.REPO_ROOT) / verdict.SUITE_FILE
    spec = importlib.util.spec_from_file_location("embedding_speed_suite", path)
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    tests = {name: test for name, test in vars(suite).items() if name.startswith("test_")}
    assert sorted(tests) == ["test_backward_prefill", "test_forward_decode", "test_forward_prefill",
                             "test_logits_decode", "test_logits_prefill", "test_step_decode"]
    suite_names = {f"{name}[{case.id}]" for name, test in tests.items() for mark in test.pytestmark
                   if mark.name == "parametrize" for case in mark.args[1]}
    plan = wl.plan(quick=True)
    for backend in command.own_hooks():
        res = child_result(backend, modes=tuple(wl.modes_of(backend)), workloads=plan)
        res["records"] = [r for r in res["records"] if wl.applies(backend, r["mode"], wl.Workload(**r["workload"]))]
        rows = verdict.workload_rows([res])
        assert rows and {r["name"] for r in rows} <= suite_names, sorted({r["name"] for r in rows} - suite_names)
        assert all(r["fullname"] == f"{verdict.SUITE_FILE}::{r['name']}" for r in rows)


def test_a_busy_machine_is_named_in_the_outputs():
    assert "shared" not in table.load_line({"other_load_cores": 0.05, "cores": 2})
    busy = table.load_line({"other_load_cores": 1.02, "cores": 2})
    assert "1.02 of 2 cores" in busy and "rerun on an idle machine" in busy
    assert "not measured" in table.load_line({"other_load_cores": None})
    text = table.MarkdownReport().render([child_result()], verdict.workload_rows([child_result()]),
                                         {"other_load_cores": 1.02, "cores": 2})
    assert "rerun on an idle machine" in text.splitlines()[2]


def test_the_machines_own_drift_between_processes_is_named():
    """Each workload's limit as measured in every process: 18 and 27 GB/s in a backend's two
    processes is a machine that moved 50%, said in both outputs; one process says nothing."""
    from gpt2_conformance.bench import processes

    results = [processes.combine([child_result(limit=18.0), child_result(limit=27.0)])]
    line = table.drift_line(results)
    assert "moved by up to 50% between this run's processes (forward_prefill B8-T1024-d768)" in line, line
    rows = verdict.workload_rows(results)
    assert line in table.ConsoleTable().render(results, rows, {"cores": 2})
    assert "The machine itself: each workload's limit moved by up to 50%" in table.MarkdownReport().render(
        results, rows, {"cores": 2})
    assert table.drift_line([child_result()]) is None


def test_a_missing_optional_package_costs_one_output_and_a_line(tmp_path, monkeypatch, capsys):
    """README command 1's environment minus pytest-benchmark and matplotlib (issue 12 part 3):
    every figure is still written, the PNGs each cost one clear line, and the run succeeds."""
    rows_seen = {}

    def fake_child(request, log_dir, timeout):
        res = child_result(workloads=[wl.Workload("forward", "prefill", 8, 1024, 768),
                                      wl.Workload("step", "decode", 1, 1, 768, 512)])
        rows_seen["n"] = len(res["records"])
        return res

    for module in ("pytest_benchmark", "pytest_benchmark.stats", "pytest_benchmark.plugin", "matplotlib",
                   "matplotlib.pyplot"):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ModuleNotFoundError
    monkeypatch.setattr(command, "run_child", fake_child)
    assert command.run(bench_args(tmp_path, "--quick")) == 0
    out, printed = tmp_path / "out", capsys.readouterr().out
    raw = json.loads((out / "bench-results.json").read_text())
    assert len(raw["results"][0]["records"]) == rows_seen["n"] == 2
    data = json.loads((out / "bench.json").read_text())
    assert len(data["benchmarks"]) == 2 and data["benchmarks"][0]["stats"]["median"] > 0
    assert "| forward_prefill | B8-T1024-d768 | numpy |" in (out / "bench.md").read_text()
    assert not (out / "bench.png").exists() and not (out / "bench-decode-step.png").exists()
    for png in ("bench.png", "bench-decode-step.png"):
        assert f"bench: no {png}: " in printed and "the other outputs are written" in printed
    assert "Traceback" not in printed


def test_a_failing_output_never_costs_the_others(tmp_path, monkeypatch):
    res = child_result()
    rows = verdict.workload_rows([res])
    monkeypatch.setattr(table.MarkdownReport, "render", lambda *a: 1 / 0)
    said = []
    paths = files.write_all([res], rows, {"device": "cpu", "root": "."}, str(tmp_path), say=said.append)
    assert "markdown" not in paths and {"raw", "json"} <= set(paths)
    assert said == ["bench: no bench.md: ZeroDivisionError: division by zero; the other outputs are written"]


def test_decode_step_table_and_plot(tmp_path):
    step, fwd, head = (wl.Workload("step", "decode", 1, 1, 768, 512), wl.Workload("forward", "decode", 1, 1, 768, 512),
                       wl.Workload("logits", "decode", 1, 1, 768, 512))
    fast = child_result("hf-transformers", median=0.005, workloads=[step, fwd, head], modes=("bridge", "native"))
    slow = child_result("keras-hub-jax", median=0.099, workloads=[step], modes=("native",))
    rows = verdict.workload_rows([fast, slow])
    steps = verdict.decode_steps(rows)
    assert [(s["backend"], s["mode"]) for s in steps][-1] == ("keras-hub-jax", "native")
    assert steps[0]["embed_ms"] == pytest.approx(5.0) and steps[0]["head_ms"] == pytest.approx(5.0)
    md = table.MarkdownReport().render([fast, slow], rows, {"step_png": "bench-decode-step.png"})
    assert "## Decode step (embedding + tied head at B=1, T=1)" in md and "![decode step](bench-decode-step.png)" in md
    assert "| keras-hub-jax | native | 99.000 |" in md
    if importlib.util.find_spec("matplotlib"):
        path = plot.DecodeStepPlot().write(rows, str(tmp_path / "step.png"))
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    fields = benchmark_json.row_fields(rows[0])
    assert {"backend", "implementation", "workload", "shape", "median_s", "gbps", "limit_gbps", "pct_of_limit",
            "cache", "device"} <= set(fields)
