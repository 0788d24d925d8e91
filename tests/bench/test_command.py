"""The `bench` subcommand with its children faked: every output written and the gate applied,
--malloc reaching the child's environment, --backend names expanded or refused."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess

import pytest

from gpt2_conformance.bench import command
from helpers.bench_results import bench_args, child_request, child_result


def test_command_writes_all_outputs_and_gates(tmp_path, monkeypatch, capsys):
    medians = iter([0.010] * 3 + [0.012] * 6)  # the baseline's 3 processes, then two runs 20% slower
    monkeypatch.setattr(command, "run_child", lambda request, log_dir, timeout: child_result(median=next(medians)))
    assert command.run(bench_args(tmp_path, "--quick")) == 0
    out = tmp_path / "out"
    assert (out / "bench.json").exists() and (out / "bench.md").exists()
    assert "| forward_prefill | B8-T1024-d768 | numpy |" in (out / "bench.md").read_text()
    if importlib.util.find_spec("matplotlib"):
        assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    baseline = tmp_path / "baseline.json"
    baseline.write_text((out / "bench.json").read_text())
    assert command.run(bench_args(tmp_path, "--quick", "--compare", str(baseline), "--fail-above", "10",
                                  "--confirm", "0")) == 1
    assert "REGRESSED" in capsys.readouterr().out
    assert command.run(bench_args(tmp_path, "--quick", "--compare", str(baseline), "--fail-above", "30")) == 0
    assert next(medians, None) is None  # every backend ran in 3 processes each time


def test_a_bench_that_timed_nothing_exits_3(tmp_path, monkeypatch, capsys):
    """Every backend skipped (`--device gpu` where there is none): as `run`, exit 3 and a line
    saying so; it exited 0, so a CI gate passed having timed nothing. A skip is final: the backend
    is not started again for the other processes."""
    requests = []

    def skipped(request, log_dir, timeout):
        requests.append(request["backend"])
        return {"backend": request["backend"], "device": "gpu", "records": [], "skipped": "numpy has no GPU"}

    monkeypatch.setattr(command, "run_child", skipped)
    assert command.run(bench_args(tmp_path, "--quick", "--device", "gpu")) == 3
    assert "bench: nothing was timed: every backend was skipped" in capsys.readouterr().out
    assert len(requests) == len(set(requests)), requests


def test_a_regression_is_timed_again_and_judged_on_all_its_processes(tmp_path, monkeypatch, capsys):
    """Three processes that all landed 20% slow, then three confirming processes at the
    baseline's speed: not a regression (the pooled row's fastest process is the baseline's).
    Three more that hold the slowdown: REGRESSED, on six processes. The confirming children
    time only the regressed rows' workloads and modes."""
    medians, requests = [], []

    def fake_child(request, log_dir, timeout):
        requests.append(request)
        return child_result(median=medians.pop(0))

    monkeypatch.setattr(command, "run_child", fake_child)
    medians[:] = [0.010] * 3
    assert command.run(bench_args(tmp_path, "--quick")) == 0
    baseline = tmp_path / "baseline.json"
    baseline.write_text((tmp_path / "out" / "bench.json").read_text())
    gate = ("--quick", "--compare", str(baseline), "--fail-above", "10")

    medians[:], requests[:] = [0.012] * 3 + [0.010] * 3, []
    assert command.run(bench_args(tmp_path, *gate)) == 0
    out = capsys.readouterr().out
    assert "confirm: 1 row(s) REGRESSED" in out and "0 of the 1 row(s) still REGRESSED" in out, out[-1500:]
    confirming = requests[3:]
    assert len(confirming) == 3 and all(r["modes"] == ["suite"] for r in confirming)
    assert all({w["kind"] + "_" + w["phase"] for w in r["workloads"]} == {"forward_prefill"} for r in confirming)
    row = json.loads((tmp_path / "out" / "bench.json").read_text())["benchmarks"][0]["extra_info"]
    assert [round(m, 6) for m in row["process_medians_s"]] == [0.012] * 3 + [0.010] * 3

    medians[:] = [0.012] * 6
    assert command.run(bench_args(tmp_path, *gate)) == 1
    out = capsys.readouterr().out
    assert "1 of the 1 row(s) still REGRESSED" in out and "compare: FAILED" in out, out[-1500:]
    assert command.run(bench_args(tmp_path, *gate[:1], "--confirm", "-1")) == 2


def test_backends_run_interleaved_in_fresh_processes_and_rows_keep_each_process_median(tmp_path, monkeypatch, capsys):
    order = []
    medians = {"numpy": iter([0.010, 0.011, 0.012]), "torch": iter([0.020, 0.020, 0.020])}

    def fake_child(request, log_dir, timeout):
        order.append(request["backend"])
        return child_result(backend=request["backend"], median=next(medians[request["backend"]]))

    monkeypatch.setattr(command, "run_child", fake_child)
    monkeypatch.setattr(command, "installed", lambda name: True)
    args = bench_args(tmp_path, "--quick", "--backend", "torch")
    assert command.run(args) == 0
    assert order == ["numpy", "torch", "torch", "numpy", "numpy", "torch"]  # each round starts one later
    rows = {b["params"]["backend"]: b for b in json.loads((tmp_path / "out" / "bench.json").read_text())["benchmarks"]}
    assert [round(m, 6) for m in rows["numpy"]["extra_info"]["process_medians_s"]] == [0.010, 0.011, 0.012]
    assert rows["numpy"]["extra_info"]["process_spread_pct"] == pytest.approx(100 * 0.002 / 0.011, rel=0.02)
    assert rows["numpy"]["stats"]["rounds"] == 15  # the three processes' samples together
    assert "10.000/11.000/12.000 (18%)" in capsys.readouterr().out
    assert command.run(bench_args(tmp_path, "--processes", "0")) == 2


def test_malloc_setting_reaches_the_backend_process(tmp_path, monkeypatch):
    seen = {}

    def fake_run(cmd, stderr, env, timeout, cwd):
        seen.update(env)
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(command.subprocess, "run", fake_run)
    request = child_request("numpy")  # retain unless asked otherwise
    result = command.run_child(request, str(tmp_path), timeout=1)
    assert "timeout" in result["error"]
    assert seen["MALLOC_MMAP_THRESHOLD_"] == str(4 << 30) and seen["MALLOC_TRIM_THRESHOLD_"] == str(64 << 30)
    assert seen["MALLOC_ARENA_MAX"] == "1"  # worker threads' arenas unmap their heaps: the main one
    seen.clear()
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "12345")  # "system" drops even an inherited setting
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    command.run_child(dict(request, malloc="system"), str(tmp_path), timeout=1)
    assert "MALLOC_MMAP_THRESHOLD_" not in seen and "MALLOC_TRIM_THRESHOLD_" not in seen
    assert "MALLOC_ARENA_MAX" not in seen
    assert seen["PYTHONUNBUFFERED"] == "1"


def test_backend_names_expand_all_and_refuse_unknown_names(tmp_path, capsys):
    from gpt2_conformance import registry

    assert command.backend_names(None) == [b for b in command.own_hooks() if command.installed(b)]
    every = command.backend_names(["all"])
    assert every[0] == "numpy" and set(every) <= set(registry.available())
    assert command.backend_names(["numpy", "numpy", "x.y:z"]) == ["numpy", "x.y:z"]
    with pytest.raises(LookupError, match="'nope': unknown backend"):
        command.backend_names(["nope"])
    args = bench_args(tmp_path)
    args.backend = ["nope"]
    assert command.run(args) == 2 and "unknown backend" in capsys.readouterr().err


@pytest.mark.parametrize("options, says", [
    (["--quick", "--sizes", "1024"], "--sizes does not apply with --quick"),
    (["--mode", "nope"], "--mode nope: no backend timed here has it; modes: numpy: suite,"),
    (["--max-time", "-1"], "--max-time -1.0: must be > 0 seconds"),
    (["--timeout", "0"], "--timeout 0.0: must be > 0 seconds"),
    (["--fail-above", "-5"], "--fail-above -5.0: must be >= 0"),
])
def test_options_that_would_time_nothing_or_something_else_are_refused(tmp_path, monkeypatch, capsys, options, says):
    """Each of these once started a run: a negative --max-time, a --timeout of 0, a --mode no backend
    has and --sizes beside --quick (which ignored it) all timed nothing or not what was asked."""
    monkeypatch.setattr(command, "run_child", lambda *a, **k: pytest.fail("a backend was timed"))
    assert command.run(bench_args(tmp_path, *options)) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "0", "768,-1", ""])
def test_sizes_must_be_positive_integers(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exit_:
        bench_args(tmp_path, "--sizes", value)
    assert exit_.value.code == 2
    assert f"argument --sizes: {value!r}: n_embd values are positive integers" in capsys.readouterr().err


def test_a_mode_of_one_selected_backend_is_accepted(tmp_path):
    args = bench_args(tmp_path, "--mode", "compile")
    args.backend = ["numpy", "torch"]
    assert command.bad_args(args, ["numpy", "torch"]) is None
    spec = "gpt2_conformance.backends.numpy.adapter:NumpyAdapter"
    assert command.bad_args(args, ["numpy", spec]) is None  # a module:factory's modes are known in its child only


def test_an_adapter_spec_that_is_not_an_adapter_is_refused_before_any_child(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(command, "run_child", lambda *a, **k: pytest.fail("a backend was timed"))
    args = bench_args(tmp_path)
    args.backend = ["helpers.bad_adapters:NOT_A_FACTORY"]
    assert command.run(args) == 2
    assert "adapter 'helpers.bad_adapters:NOT_A_FACTORY': 5 (int) is not an adapter" in capsys.readouterr().err


def test_the_child_finds_a_users_module_from_the_users_folder(tmp_path, monkeypatch):
    """The child runs in the project's root: `PYTHONPATH=. bench --backend mymod:factory` once
    timed nothing there (No module named 'mymod')."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([".", "/opt/lib"]))
    assert command._child_pythonpath().split(os.pathsep) == [str(tmp_path), "/opt/lib"]
    monkeypatch.delenv("PYTHONPATH")
    assert command._child_pythonpath() == str(tmp_path)


@pytest.mark.parametrize("content, says", [
    ('{"format": "gpt2-conformance-report/2", "clauses": []}', "a conformance report is not a bench run"),
    ('{"meta": {}, "results": []}', "bench-results.json is the raw output: use bench.json beside it"),
    ("not json", "not valid JSON"),
    ('{"benchmarks": [{"name": "x", "stats": {}}]}', "a benchmark without a name or a numeric stats.median"),
])
def test_a_baseline_that_is_not_a_bench_json_is_refused_before_timing(tmp_path, monkeypatch, capsys, content, says):
    """--compare once timed the whole run (an hour in full) before reading its baseline; --across
    ended in a traceback."""
    monkeypatch.setattr(command, "run_child", lambda *a, **k: pytest.fail("a backend was timed"))
    baseline = tmp_path / "baseline.json"
    baseline.write_text(content)
    assert command.run(bench_args(tmp_path, "--quick", "--compare", str(baseline))) == 2
    assert f"--compare {baseline}: " in (err := capsys.readouterr().err) and says in err
    assert command.run(bench_args(tmp_path, "--across", str(baseline), str(baseline))) == 2
    assert f"--across {baseline}: " in (err := capsys.readouterr().err) and says in err


def test_a_gate_that_matched_no_row_fails(tmp_path, monkeypatch, capsys):
    """A baseline of other workloads: nothing judged, so the gate cannot pass (it passed, exit 0)."""
    monkeypatch.setattr(command, "run_child", lambda request, log_dir, timeout: child_result(median=0.010))
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"benchmarks": [{"name": "test_other[numpy-suite]", "stats": {"median": 0.01}}]}))
    assert command.run(bench_args(tmp_path, "--quick", "--compare", str(baseline), "--confirm", "0")) == 1
    assert "compare: FAILED: no row of this run is in the baseline, so nothing was judged" in capsys.readouterr().out
