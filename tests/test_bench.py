"""The bench code itself, without timing anything meaningful (speed lives in tests/benchmarks
and `gpt2-conformance bench`): byte accounting, the JSON's compatibility with
pytest-benchmark's own loader and `pytest-benchmark compare`, the regression gate, the
Markdown/PNG outputs, and the GPU path's skip on a CPU-only machine."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from conformance import gpt2
from conformance.bench import child, command, compare, outputs
from conformance.bench import workloads as wl

pytest.importorskip("pytest_benchmark")


# -- bytes moved ------------------------------------------------------------------------
def test_forward_bytes_are_the_issue_figure():
    w = wl.Workload("forward", "prefill", 8, 1024, 768)
    assert wl.bytes_moved(w) == 3 * 8 * 1024 * 768 * 4 == 75_497_472  # "the forward moves 75.5 MB"
    assert w.is_bar_shape


def test_backward_and_logits_bytes():
    w = wl.Workload("backward", "prefill", 8, 1024, 768)
    assert wl.bytes_moved(w) == 2 * 8 * 1024 * 768 * 4 + (gpt2.N_VOCAB + gpt2.N_CTX) * 768 * 4
    d = wl.Workload("logits", "decode", 1, 1, 768, 512)
    assert wl.bytes_moved(d) == gpt2.N_VOCAB * 768 * 4 + 768 * 4 + gpt2.N_VOCAB * 4
    assert wl.flops(d) == 2 * 768 * gpt2.N_VOCAB
    assert wl.bytes_moved(wl.Workload("forward", "prefill", 8, 1024, 768, dtype="float16")) == 75_497_472 // 2


def test_plan_covers_the_issue_shapes():
    full = wl.plan()
    assert {w.n_embd for w in full if w.kind == "forward" and w.phase == "prefill"} == set(gpt2.SIZES.values())
    decode = [w for w in full if w.kind == "forward" and w.phase == "decode"]
    assert {w.batch for w in decode} == {1, 4, 16, 64} and all(w.seq == 1 and w.past_length > 0 for w in decode)
    assert {w.kind for w in full} == set(wl.KINDS)
    for plan in (full, wl.plan(quick=True)):
        assert sum(w.is_bar_shape for w in plan) == 1 and sum(w.is_cold_bar_shape for w in plan) == 1
    cold = wl.Workload("forward", "prefill", 8, 1024, 768, cache="cold")
    assert cold.shape_id == "B8-T1024-d768-cold" and not cold.is_bar_shape  # the bar is judged warm


# -- cache state and timing -------------------------------------------------------------
def test_llc_is_read_from_sysfs_and_sizes_the_flush(tmp_path):
    from conformance.bench import cache

    for index, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "64K"),
                                                 (2, "Unified", "2048K"), (3, "Unified", "480M")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert cache.llc_bytes(str(tmp_path)) == 480 << 20
    assert cache.llc_bytes(str(tmp_path / "missing")) is None
    assert cache.flush_bytes(480 << 20) == 960 << 20
    assert cache.flush_bytes(8 << 20) == cache.FLUSH_MIN_BYTES and cache.flush_bytes(4 << 30) == cache.FLUSH_MAX_BYTES
    assert cache.flush_bytes(None) == 512 << 20


def test_before_hook_runs_every_round_outside_the_timed_call():
    import time

    from conformance.bench import timing

    flushes = []
    t = timing.measure(lambda: None, before=lambda: (flushes.append(1), time.sleep(0.02)),
                       min_rounds=5, max_rounds=5, max_time=0, warmup=1)
    assert len(flushes) == len(t.samples) == 5
    assert t.median < 0.005, f"median={t.median * 1e3:.1f} ms, but the 20 ms before() must not be timed"


def test_modes_are_read_without_importing_the_framework():
    from backends.numpy import bench

    assert wl.modes_of("numpy") == list(bench.MODES)
    for backend in ("torch", "tensorflow", "jax"):
        modes = wl.modes_of(backend)
        assert "suite" in modes and len(modes) >= 2


# -- synthetic results: what a child returns ----------------------------------------------
def _result(backend="numpy", median=0.004, limit=18.0, modes=("suite",)):
    w = wl.Workload("forward", "prefill", 8, 1024, 768)
    samples = [median * f for f in (0.9, 1.0, 1.0, 1.1, 1.2)]
    from conformance.bench.timing import Timing

    t = Timing(first_call_s=0.5, samples=samples, cpu_ratio=1.0)
    recs = [{"mode": m, "workload": w.as_dict(), "first_call_s": 0.5, "samples": samples, "cpu_ratio": 1.0,
             "stats": t.stats()} for m in modes]
    bw = {"bytes": 1 << 20, "copy_gbps": limit, "copy_gbps_min": limit, "copy_gbps_max": limit,
          "gather_gbps": limit / 2, "gather_gbps_min": 1.0, "gather_gbps_max": 1.0}
    return {"backend": backend, "device": "cpu", "records": recs, "bandwidth": bw, "modes": {m: m for m in modes},
            "suite_mode": modes[0], "fastest_mode": modes[-1], "check": {m: "on" for m in modes}, "cores": 2}


def _write(tmp_path, results, name="bench"):
    rows = outputs.rows(results)
    paths = outputs.write_all(results, rows, {"device": "cpu", "root": "."}, str(tmp_path / name))
    return rows, paths


def test_pct_of_limit_and_bar():
    rows = outputs.rows([_result("torch", median=75_497_472 / 18e9 / 0.5)])  # exactly half the limit
    assert rows[0]["pct_limit"] == pytest.approx(50.0)
    verdict = outputs.bar(rows)
    assert verdict["torch"]["meets"] is False and verdict["best"]["meets"] is False
    verdict = outputs.bar(outputs.rows([_result("jax", median=75_497_472 / 18e9 / 0.9)]))
    assert verdict["jax"]["meets"] and verdict["best"]["meets"]


def test_cold_rows_stay_out_of_the_bar_and_are_reported_beside_it():
    res = _result("torch", median=75_497_472 / 18e9 / 0.9)
    cold = dict(res["records"][0], workload=wl.Workload("forward", "prefill", 8, 1024, 768, cache="cold").as_dict())
    cold["stats"] = dict(cold["stats"], median=75_497_472 / 18e9 / 0.3)  # 30% of the limit, cold
    res["records"] = [cold]
    res["cache"] = {"llc_bytes": 480 << 20, "flush": "read 960 MiB before each timed call",
                    "cold_copy": {"B8-T1024-d768-cold": {"bytes": 25165824, "gbps": 10.8, "gbps_min": 9.0,
                                                         "gbps_max": 12.0}}}
    rows = outputs.rows([res])
    assert outputs.bar(rows) == {}  # a cold row never decides the bar
    c = outputs.cold_bar([res], rows)["torch"]
    assert c["pct"] == pytest.approx(30.0) and c["pct_of_cold_copy"] == pytest.approx(100 * 5.4 / 10.8)
    text = outputs.console([res], rows)
    assert "torch: suite" in text and "50% of a cold copy of h's bytes (10.8 GB/s)" in text
    assert "LLC 480 MiB" in text and "cold copy of 24 MiB 10.8 GB/s" in text


def test_json_loads_with_pytest_benchmarks_own_loader(tmp_path):
    from pytest_benchmark.storage.file import FileStorage

    class Logger:  # the loader reports a file it cannot read as a warning and skips it
        warnings: list = []

        def warning(self, text, *args, **kwargs):
            self.warnings.append(text)

    _, paths = _write(tmp_path, [_result(modes=("suite", "take-out"))])
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
    _, paths = _write(tmp_path, [_result()])
    cli = [sys.executable, "-c", "import sys; from pytest_benchmark.cli import main; sys.exit(main())"]
    done = subprocess.run([*cli, "compare", paths["json"], "--columns=median,iqr"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "test_forward_prefill[numpy-suite-B8-T1024-d768]" in done.stdout


# -- the regression gate ------------------------------------------------------------------
def test_gate_fails_a_20_percent_regression_at_10_and_passes_it_at_30(tmp_path):
    _, base = _write(tmp_path, [_result(median=0.010)], "base")
    _, now = _write(tmp_path, [_result(median=0.012)], "now")
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


def _args(tmp_path, *extra):
    import argparse

    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["bench", "--backend", "numpy", "--out-dir", str(tmp_path / "out"), *extra])


def test_command_writes_all_outputs_and_gates(tmp_path, monkeypatch, capsys):
    medians = iter([0.010, 0.012, 0.012])
    monkeypatch.setattr(command, "run_child", lambda request, log_dir, timeout: _result(median=next(medians)))
    assert command.run(_args(tmp_path, "--quick")) == 0
    out = tmp_path / "out"
    assert (out / "bench.json").exists() and (out / "bench.md").exists()
    assert "| forward_prefill | B8-T1024-d768 | numpy |" in (out / "bench.md").read_text()
    if importlib.util.find_spec("matplotlib"):
        assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    baseline = tmp_path / "baseline.json"
    baseline.write_text((out / "bench.json").read_text())
    assert command.run(_args(tmp_path, "--quick", "--compare", str(baseline), "--fail-above", "10")) == 1
    assert "REGRESSED" in capsys.readouterr().out
    assert command.run(_args(tmp_path, "--quick", "--compare", str(baseline), "--fail-above", "30")) == 0


# -- running a backend (tiny shapes: checks the plumbing, times nothing of interest) --------
def _request(backend, device="cpu"):
    w = wl.Workload("forward", "decode", 1, 1, 768, 3)
    return {"backend": backend, "device": device, "workloads": [w.as_dict()], "bandwidth_bytes": 1 << 20,
            "min_rounds": 1, "max_rounds": 2, "max_time": 0, "warmup": 0}


def test_child_runs_the_numpy_hooks():
    result = child.run(_request("numpy"))
    assert result["skipped"] is None and result["bandwidth"]["copy_gbps"] > 0
    assert {r["mode"] for r in result["records"]} == set(wl.modes_of("numpy"))
    assert all("stats" in r for r in result["records"])


def test_numpy_hooks_compute_the_spec():
    from backends.numpy import bench

    wte = np.arange(gpt2.N_VOCAB * 4, dtype=np.float32).reshape(-1, 4)
    wpe = np.ones((gpt2.N_CTX, 4), np.float32)
    ids = np.array([[0, 50256, 7]], np.int32)
    expect = wte[ids] + wpe[5:8][None]
    for mode in bench.MODES:
        r = bench.Runner(wte, wpe, mode, "cpu")
        out = r.make(wl.Workload("forward", "prefill", 1, 3, 4, 5), ids, 5)()
        np.testing.assert_array_equal(out, expect)
        with pytest.raises(Exception, match="50257"):
            r.make(wl.Workload("forward", "prefill", 1, 1, 4, 0), np.array([[50257]], np.int32), 0)()


def test_gpu_path_is_skipped_with_a_reason_on_a_cpu_machine():
    result = child.run(_request("numpy", "gpu"))
    assert result["records"] == [] and "GPU" in result["skipped"]
    if importlib.util.find_spec("torch"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
        result = child.run(_request("torch", "gpu"))
        assert result["records"] == [] and "no GPU" in result["skipped"]
        text = outputs.console([result], outputs.rows([result]))
        assert "torch (gpu): SKIPPED: torch sees no GPU" in text


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_fastest_mode_keeps_the_bounds_check(backend):
    """The mode the bar is judged on must still refuse a bad id (XLA drops TF's asserts inside
    a jit_compile cluster; the xla mode keeps its Assert outside the cluster)."""
    pytest.importorskip(backend)
    import importlib

    hooks = importlib.import_module(f"backends.{backend}.bench")
    wte = np.arange(gpt2.N_VOCAB * 4, dtype=np.float32).reshape(-1, 4)
    wpe = np.ones((gpt2.N_CTX, 4), np.float32)
    r = hooks.Runner(wte, wpe, hooks.FASTEST_MODE, "cpu")
    w = wl.Workload("forward", "prefill", 1, 2, 4, 3)
    out = r.sync(r.make(w, r.put(np.array([[1, 50256]], np.int32)), 3)())
    np.testing.assert_array_equal(np.asarray(out), wte[[[1, 50256]]] + 1)
    for bad in ([[1, 50257]], [[-1, 2]]):
        with pytest.raises(Exception, match="outside the wte table"):
            r.sync(r.make(w, r.put(np.array(bad, np.int32)), 3)())


def test_other_load_subtracts_the_bench_own_cpu_time(monkeypatch):
    from conformance.bench import timing

    clock = {"busy": 100.0, "own": 10.0, "wall": 50.0}
    monkeypatch.setattr(timing, "_system_busy_seconds", lambda: clock["busy"])
    monkeypatch.setattr(timing, "_own_cpu_seconds", lambda: clock["own"])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock["wall"])
    load = timing.OtherLoad()
    clock.update(busy=100.0 + 30.0, own=10.0 + 20.0, wall=50.0 + 10.0)  # 30 s busy in 10 s, 20 of them ours
    assert load.cores() == pytest.approx(1.0)
    monkeypatch.setattr(timing, "_system_busy_seconds", lambda: None)
    assert load.cores() is None


def test_a_busy_machine_is_named_in_the_outputs():
    assert "shared" not in outputs.load_line({"other_load_cores": 0.05, "cores": 2})
    busy = outputs.load_line({"other_load_cores": 1.02, "cores": 2})
    assert "1.02 of 2 cores" in busy and "rerun on an idle machine" in busy
    assert "not measured" in outputs.load_line({"other_load_cores": None})
    text = outputs.markdown([_result()], outputs.rows([_result()]), {"other_load_cores": 1.02, "cores": 2})
    assert "rerun on an idle machine" in text.splitlines()[2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page-fault counts and glibc's malloc are Linux's")
def test_faults_per_call_tells_a_fresh_output_from_a_reused_one():
    from conformance.bench import timing

    buffer = np.empty(64 << 18, np.float32)  # 64 MiB, above glibc's largest mmap threshold
    reused = timing.measure(lambda: buffer.fill(1.0), min_rounds=3, max_rounds=3, max_time=0, warmup=1)
    fresh = timing.measure(lambda: np.ones(64 << 18, np.float32), min_rounds=3, max_rounds=3, max_time=0, warmup=1)
    # 64 MiB is 32 huge pages or 16384 small ones: either way far above a reused buffer's 0
    assert reused.faults_per_call < 2 <= 16 <= fresh.faults_per_call, (reused.faults_per_call, fresh.faults_per_call)


def test_malloc_setting_reaches_the_backend_process(tmp_path, monkeypatch):
    seen = {}

    def fake_run(cmd, stderr, env, timeout, cwd):
        seen.update(env)
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(command.subprocess, "run", fake_run)
    request = _request("numpy")  # retain unless asked otherwise
    result = command.run_child(request, str(tmp_path), timeout=1)
    assert "timeout" in result["error"]
    assert seen["MALLOC_MMAP_THRESHOLD_"] == str(4 << 30) and seen["MALLOC_TRIM_THRESHOLD_"] == str(64 << 30)
    seen.clear()
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    command.run_child(dict(request, malloc="system"), str(tmp_path), timeout=1)
    assert "MALLOC_MMAP_THRESHOLD_" not in seen and seen["PYTHONUNBUFFERED"] == "1"


# -- backends without their own hooks: timed through the Adapter API -----------------------
def test_an_adapter_spec_is_timed_through_the_adapter_api():
    spec = "backends.numpy.adapter:NumpyAdapter"  # any module:factory; this one needs no framework
    request = dict(_request(spec), workloads=[wl.Workload("forward", "decode", 2, 1, 768, 3).as_dict(),
                                              wl.Workload("backward", "decode", 2, 1, 768, 3).as_dict(),
                                              wl.Workload("logits", "decode", 1, 1, 768, 3).as_dict()])
    result = child.run(request)
    assert result["skipped"] is None and result["modes"] == {"adapter": result["modes"]["adapter"]}
    kinds = {wl.Workload(**r["workload"]).kind for r in result["records"] if "stats" in r}
    assert kinds == {"forward", "logits"}, f"timed {kinds}, but should be forward and logits (no backward)"
    rows = outputs.rows([result])
    assert outputs.bar(rows) == {}  # the implementation's own check: never counted for the bar
    gpu = child.run(dict(_request(spec, "gpu")))
    assert gpu["records"] == [] and "GPU" in gpu["skipped"]


def test_backend_names_expand_all_and_refuse_unknown_names(tmp_path, capsys):
    from conformance import registry

    assert command.backend_names(None) == [b for b in child.OWN_HOOKS if command.installed(b)]
    every = command.backend_names(["all"])
    assert every[0] == "numpy" and set(every) <= set(registry.available())
    assert command.backend_names(["numpy", "numpy", "x.y:z"]) == ["numpy", "x.y:z"]
    with pytest.raises(LookupError, match="'nope': unknown backend"):
        command.backend_names(["nope"])
    args = _args(tmp_path)
    args.backend = ["nope"]
    assert command.run(args) == 2 and "unknown backend" in capsys.readouterr().err
