"""The bench code itself, without timing anything meaningful (speed lives in tests/benchmarks
and `gpt2-conformance bench`): the least-bytes model against hand counts, each row's limit in
its own cache state and the model-error flag, the JSON's compatibility with pytest-benchmark's
own loader and `pytest-benchmark compare`, the regression gate, outputs that survive a missing
package, the native hooks (no numpy conversion in a timed call; the same h as the Adapter
API; the torch reference's native path times as its own hooks do), and the GPU path's skip
on a CPU-only machine."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.bench import benchmark_json, child, command, compare, files, plot, table, verdict
from gpt2_conformance.bench import workloads as wl

# -- the least bytes each workload must move: hand counts ---------------------------------
BAR_BYTES = 8 * 1024 * 768 * 4 + 1024 * 768 * 4 + 8 * 1024 * 768 * 4  # wte rows + wpe rows once + h


def test_forward_bytes_are_the_issue_12_hand_count():
    w = wl.Workload("forward", "prefill", 8, 1024, 768)
    assert w.is_bar_shape
    # issue 12: "wte rows B*T*d*s + wpe rows T*d*s + h written B*T*d*s = 53.5 MB at that shape"
    assert wl.bytes_moved(w) == BAR_BYTES == 53_477_376
    assert wl.traffic(w) == (8 * 1024 * 768 * 4 + 1024 * 768 * 4, 8 * 1024 * 768 * 4)
    # a repeated id is one row read: 7,000 distinct ids of 8,192 read 7,000 rows
    assert wl.traffic(w, 7000) == ((7000 + 1024) * 768 * 4, 8 * 1024 * 768 * 4)
    assert wl.bytes_moved(wl.Workload("forward", "prefill", 8, 1024, 768, dtype="float16")) == BAR_BYTES // 2
    # decode at B=64 after 512 cached positions: 64 rows of wte, one of wpe, 64 of h
    assert wl.traffic(wl.Workload("forward", "decode", 64, 1, 768, 512)) == (65 * 768 * 4, 64 * 768 * 4)
    with pytest.raises(ValueError, match="distinct_ids=9000, but should be in"):
        wl.traffic(w, 9000)


def test_backward_logits_and_step_bytes_by_hand():
    V, C, d = 50257, 1024, 768
    assert (V, C) == (gpt2.N_VOCAB, gpt2.N_CTX)
    # backward: dh read once (one pass can feed both sums); both dense gradients written
    assert wl.traffic(wl.Workload("backward", "prefill", 8, 1024, d)) == (8 * 1024 * d * 4, (V + C) * d * 4)
    assert wl.traffic(wl.Workload("backward", "decode", 64, 1, d, 512)) == (64 * d * 4, (V + C) * d * 4)
    # head: wte read whole and h read, logits written
    head = wl.Workload("logits", "decode", 1, 1, d, 512)
    assert wl.traffic(head) == (V * d * 4 + d * 4, V * 4)
    assert wl.flops(head) == 2 * d * V
    assert wl.traffic(wl.Workload("logits", "prefill", 1, 1024, d)) == ((V + 1024) * d * 4, 1024 * V * 4)
    # decode step: wte read once (it holds the gathered row), one wpe row, logits written
    step = wl.Workload("step", "decode", 1, 1, d, 512)
    assert wl.traffic(step) == (V * d * 4 + d * 4, V * 4)
    assert wl.bytes_moved(step) < wl.bytes_moved(wl.step_parts(step)[0]) + wl.bytes_moved(head)
    assert [p.kind for p in wl.step_parts(step)] == ["forward", "logits"]


def test_plan_covers_the_issue_shapes():
    full = wl.plan()
    assert {w.n_embd for w in full if w.kind == "forward" and w.phase == "prefill"} == set(gpt2.SIZES.values())
    decode = [w for w in full if w.kind == "forward" and w.phase == "decode"]
    assert {w.batch for w in decode} == {1, 4, 16, 64} and all(w.seq == 1 and w.past_length > 0 for w in decode)
    assert {w.kind for w in full} == set(wl.KINDS)
    for plan in (full, wl.plan(quick=True)):
        assert sum(w.is_bar_shape for w in plan) == 1 and sum(w.is_cold_bar_shape for w in plan) == 1
        steps = [w for w in plan if w.kind == "step"]
        assert [(w.batch, w.seq) for w in steps] == [(1, 1)], "the decode step is timed at B=1, T=1"
    cold = wl.Workload("forward", "prefill", 8, 1024, 768, cache="cold")
    assert cold.shape_id == "B8-T1024-d768-cold" and not cold.is_bar_shape  # the bar is judged warm


# -- cache state and timing -------------------------------------------------------------
def test_llc_is_read_from_sysfs_and_sizes_the_flush(tmp_path):
    from gpt2_conformance.bench import cache

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

    from gpt2_conformance.bench import timing

    flushes = []
    t = timing.measure(lambda: None, before=lambda: (flushes.append(1), time.sleep(0.02)),
                       min_rounds=5, max_rounds=5, max_time=0, warmup=1)
    assert len(flushes) == len(t.samples) == 5
    assert t.median < 0.005, f"median={t.median * 1e3:.1f} ms, but the 20 ms before() must not be timed"


def test_modes_are_read_without_importing_the_framework():
    from gpt2_conformance.backends.numpy import bench

    assert wl.modes_of("numpy") == list(bench.MODES)
    for backend in ("torch", "tensorflow", "jax"):
        modes = wl.modes_of(backend)
        assert "suite" in modes and len(modes) >= 2


# -- synthetic results: what a child returns ----------------------------------------------
def _record(mode, w, median):
    from gpt2_conformance.bench.timing import Timing

    samples = [median * f for f in (0.9, 1.0, 1.0, 1.1, 1.2)]
    t = Timing(first_call_s=0.5, samples=samples, cpu_ratio=1.0)
    return {"mode": mode, "workload": w.as_dict(), "first_call_s": 0.5, "samples": samples, "cpu_ratio": 1.0,
            "stats": t.stats(), "distinct_ids": w.batch * w.seq}


def _result(backend="numpy", median=0.004, limit=18.0, modes=("suite",), workloads=None):
    """A child's result: every workload timed at `median` in every mode, each workload's own
    (matched) limit `limit` GB/s (a dict {cache state: GB/s} gives warm and cold apart)."""
    workloads = workloads or [wl.Workload("forward", "prefill", 8, 1024, 768)]
    recs = [_record(m, w, median) for m in modes for w in workloads]
    per_state = limit if isinstance(limit, dict) else {"warm": limit, "cold": limit}
    limits = {w.group: {"read": wl.traffic(w)[0], "write": wl.traffic(w)[1], "gbps": per_state[w.cache],
                        "gbps_min": per_state[w.cache], "gbps_max": per_state[w.cache], "cache": w.cache,
                        "threads": 1, "distinct_ids": w.batch * w.seq} for w in workloads}
    bw = {"bytes": 1 << 20, "copy_gbps": 40.0, "copy_gbps_min": 40.0, "copy_gbps_max": 40.0,
          "gather_gbps": 20.0, "gather_gbps_min": 1.0, "gather_gbps_max": 1.0}
    return {"backend": backend, "device": "cpu", "records": recs, "bandwidth": bw, "limits": limits,
            "cache": {"llc_bytes": 32 << 20, "flush": "read 256 MiB before each timed call"},
            "modes": {m: m for m in modes}, "suite_mode": modes[0], "fastest_mode": modes[-1],
            "check": {m: "on" for m in modes}, "cores": 2, "implementation": f"{backend} 1.0"}


def _write(tmp_path, results, name="bench"):
    rows = verdict.workload_rows(results)
    paths = files.write_all(results, rows, {"device": "cpu", "root": "."}, str(tmp_path / name))
    return rows, paths


def test_pct_of_limit_and_bar():
    rows = verdict.workload_rows([_result("torch", median=BAR_BYTES / 18e9 / 0.5)])  # exactly half the limit
    assert rows[0]["pct_limit"] == pytest.approx(50.0)
    verdict = verdict.bar(rows)
    assert verdict["torch"]["meets"] is False and verdict["best"]["meets"] is False
    verdict = verdict.bar(verdict.workload_rows([_result("jax", median=BAR_BYTES / 18e9 / 0.89)]))
    assert verdict["jax"]["meets"] and not verdict["best"]["meets"], "89% misses the 90% bar (issue 12)"
    verdict = verdict.bar(verdict.workload_rows([_result("jax", median=BAR_BYTES / 18e9 / 0.91)]))
    assert verdict["jax"]["meets"] and verdict["best"]["meets"]


def test_warm_and_cold_are_each_judged_against_their_own_state():
    warm, cold = wl.Workload("forward", "prefill", 8, 1024, 768), \
        wl.Workload("forward", "prefill", 8, 1024, 768, cache="cold")
    # one time for both rows, a warm limit 3x the cold one (a working set in cache)
    res = _result("torch", median=BAR_BYTES / 9e9, limit={"warm": 30.0, "cold": 10.0}, workloads=[warm, cold])
    rows = verdict.workload_rows([res])
    assert {r["workload"].cache: round(r["pct_limit"]) for r in rows} == {"warm": 30, "cold": 90}
    assert verdict.bar(rows)["torch"]["pct"] == pytest.approx(30.0)
    assert verdict.bar(rows, "cold")["torch"]["pct"] == pytest.approx(90.0)
    text = table.ConsoleTable().render([res], rows, {"cores": 2, "other_load_cores": 0.0})
    assert "bar at forward_prefill B=8, T=1024, d=768, warm" in text and ", cold (" in text
    assert "machine: 2 cores, LLC 32 MiB" in text and "NOT A VERDICT" not in text
    busy = table.ConsoleTable().render([res], rows, {"cores": 2, "other_load_cores": 1.44})
    assert "NOT A VERDICT: other processes kept 1.44 cores busy" in busy


def test_a_row_above_its_limit_is_flagged_never_shown_as_a_result(tmp_path):
    res = _result("jax", median=BAR_BYTES / 18e9 / 1.35)  # 135% of its limit: the model is wrong
    rows = verdict.workload_rows([res])
    assert "pct_limit" not in rows[0] and rows[0]["model_error"].startswith("135% of its limit")
    assert verdict.bar(rows) == {}, "a flagged row never counts for the bar"
    text = table.ConsoleTable().render([res], rows)
    assert "MODEL ERROR" in text and "MODEL ERRORS: rows above 100% of their limit" in text and "135%" in text
    assert "135%" not in text.split("MODEL ERRORS")[0], "the percentage is never shown as a result"
    paths = files.write_all([res], rows, {"device": "cpu", "root": "."}, str(tmp_path))
    extra = json.loads(open(paths["json"]).read())["benchmarks"][0]["extra_info"]
    assert extra["pct_of_limit"] is None and extra["model_error"].startswith("135%")
    assert "MODEL ERRORS" in open(paths["markdown"]).read()


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
    from gpt2_conformance.backends.numpy import bench

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
        text = table.ConsoleTable().render([result], verdict.workload_rows([result]))
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
    from gpt2_conformance.bench import timing

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
    assert "shared" not in table.load_line({"other_load_cores": 0.05, "cores": 2})
    busy = table.load_line({"other_load_cores": 1.02, "cores": 2})
    assert "1.02 of 2 cores" in busy and "rerun on an idle machine" in busy
    assert "not measured" in table.load_line({"other_load_cores": None})
    text = table.MarkdownReport().render([_result()], verdict.workload_rows([_result()]), {"other_load_cores": 1.02, "cores": 2})
    assert "rerun on an idle machine" in text.splitlines()[2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page-fault counts and glibc's malloc are Linux's")
def test_faults_per_call_tells_a_fresh_output_from_a_reused_one():
    from gpt2_conformance.bench import timing

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


# -- backends without their own hooks: native hooks and the Adapter API -------------------
def test_an_adapter_spec_without_native_hooks_is_timed_through_the_bridge():
    spec = _plain_numpy_spec()
    request = dict(_request(spec), workloads=[wl.Workload("forward", "decode", 2, 1, 768, 3).as_dict(),
                                              wl.Workload("backward", "decode", 2, 1, 768, 3).as_dict(),
                                              wl.Workload("logits", "decode", 1, 1, 768, 3).as_dict(),
                                              wl.Workload("step", "decode", 1, 1, 768, 3).as_dict()])
    result = child.run(request)
    assert result["skipped"] is None and list(result["modes"]) == ["bridge"]
    kinds = {wl.Workload(**r["workload"]).kind for r in result["records"] if "stats" in r}
    assert kinds == {"forward", "logits", "step"}, f"timed {kinds}, but should be forward, logits, step (no backward)"
    rows = verdict.workload_rows([result])
    assert verdict.bar(rows) == {}  # the implementation's own check: never counted for the bar
    gpu = child.run(dict(_request(spec, "gpu")))
    assert gpu["records"] == [] and "does not claim device 'gpu'" in gpu["skipped"]


def _plain_numpy_spec() -> str:
    """module:factory of an adapter with no native hooks: the numpy reference's class, subclassed
    in this module (the bench.py beside backends/numpy/adapter.py has no native_bench)."""
    return "tests.test_bench:PlainNumpyAdapter"


from gpt2_conformance.backends.numpy.adapter import NumpyAdapter as _NumpyAdapter  # noqa: E402


class PlainNumpyAdapter(_NumpyAdapter):
    """The numpy reference as a plug-in without native hooks would be."""


class NativeNumpyAdapter(_NumpyAdapter):
    """The README's minimal adapter with its native_bench lines: the public method path."""

    def native_bench(self, device):
        from gpt2_conformance.api.bench import NativeBench

        return NativeBench(put=np.asarray, forward=lambda ids, p: self.wte[ids] + self.wpe[p:p + ids.shape[1]],
                           logits=lambda h: h @ self.wte.T)


def test_the_native_method_of_an_adapter_is_timed_beside_the_bridge():
    request = dict(_request("tests.test_bench:NativeNumpyAdapter"),
                   workloads=[wl.Workload("forward", "decode", 2, 1, 768, 3).as_dict(),
                              wl.Workload("step", "decode", 1, 1, 768, 3).as_dict()])
    result = child.run(request)
    assert list(result["modes"]) == ["native", "bridge"] and result["fastest_mode"] == "native"
    timed = {(r["mode"], wl.Workload(**r["workload"]).kind) for r in result["records"] if "stats" in r}
    assert timed == {("native", "forward"), ("native", "step"), ("bridge", "forward"), ("bridge", "step")}
    steps = verdict.decode_steps(verdict.workload_rows([result]))
    assert {s["mode"] for s in steps} == {"native", "bridge"} and all(s["embed_ms"] is None for s in steps)


def test_a_native_hook_of_the_wrong_type_is_named():
    from gpt2_conformance.bench import native

    class Wrong(_NumpyAdapter):
        def native_bench(self, device):
            return {"forward": None}

    with pytest.raises(TypeError, match="Wrong.native_bench returned dict, but should return a .*NativeBench"):
        native.find(Wrong(), "cpu")


NATIVE_BACKENDS = ("torch", "hf-transformers", "transformer-lens", "keras-hub-tensorflow", "keras-hub-jax",
                   "keras-hub-torch", "mlx-lm", "onnxruntime-hf")
NATIVE_CHECK = """
import sys, numpy as np
from gpt2_conformance import registry
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.bench import native
from gpt2_conformance.bench.child import _tables
name = sys.argv[1]
factory = registry.resolve(name)
assert native.has_native(factory), f"{name}: no native hooks"
wte, wpe = _tables(768)
adapter = factory(AdapterConfig(768))
adapter.load_tables(wte, wpe)
nb = native.find(adapter, "cpu")
ids = np.random.default_rng(0).integers(0, 50257, (2, 128)).astype(np.int64)  # int64: every adapter takes it
for past in (0, 5, 5):
    t = nb.put(ids)
    nb.sync(nb.logits(nb.sync(nb.forward(t, past))))  # first calls (caches, traces) outside the guard
    with native.conversion_guard() as seen:
        h = nb.sync(nb.forward(t, past))
        logits = nb.sync(nb.logits(h))
    assert seen == [], f"{name}: numpy conversions inside a native call: {seen}"
    assert type(h).__module__.split(".")[0] != "numpy", f"{name}: native h is {type(h)}"
    if hasattr(h, "numpy") and not hasattr(h, "detach"):  # an OrtValue or a tf tensor
        native_h = h.numpy()
    elif hasattr(adapter, "_numpy"):  # keras
        native_h = adapter._numpy(h)
    else:
        native_h = np.asarray(h.detach() if hasattr(h, "detach") else h)
    same = np.array_equal(np.asarray(adapter.embed(ids, past)), native_h)
    assert same, f"{name}: native h differs from the Adapter API's h at past_length={past}"
with native.conversion_guard() as seen:
    adapter.embed(ids, 5)
assert seen, f"{name}: the guard saw no conversion in the Adapter API's embed, so it proves nothing"
print("ok", name, [n for n, _ in seen][:3])
"""


@pytest.mark.parametrize("backend", NATIVE_BACKENDS)
def test_native_hooks_convert_nothing_and_compute_the_adapters_h(backend):
    """Every built-in native hook, in its own process (one Keras backend per process): no numpy
    conversion inside a timed forward or head (conversion_guard, shown to catch the bridge's),
    and the same h as the Adapter API, bit for bit."""
    from gpt2_conformance import registry

    missing = registry.missing_framework(backend)
    if missing:
        pytest.skip(f"{backend}: {missing} is not installed")
    done = subprocess.run([sys.executable, "-c", NATIVE_CHECK, backend], capture_output=True, text=True,
                          timeout=600, cwd=command.REPO_ROOT, env=dict(__import__("os").environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0 and "ok " + backend in done.stdout, (done.stdout + done.stderr)[-3000:]


def test_torch_reference_times_the_same_through_the_public_native_path():
    """Fairness: the torch reference reached as any implementation is (adapter + native_bench,
    put once, native sync) against its own bench.py suite mode, calls interleaved so both see
    the same load: the medians agree within the larger IQR (at least 5% of the median)."""
    pytest.importorskip("torch")
    from gpt2_conformance.backends.torch import bench as torch_bench
    from gpt2_conformance.bench import native, timing
    from gpt2_conformance.bench.adapter_hooks import AdapterHooks

    wte, wpe = child._tables(768)
    w = wl.Workload("forward", "prefill", 8, 256, 768)
    ids = child._inputs(w)[0]
    own = torch_bench.Runner(wte, wpe, "suite", "cpu")
    own_call = own.make(w, own.put(ids), 0)
    hooks = AdapterHooks("gpt2_conformance.backends.torch.adapter:TorchAdapter")
    assert hooks.native and "native" in hooks.MODES
    public = hooks.Runner(wte, wpe, "native", "cpu")
    public_call, _ = child._make(public, w, public.put(ids), 0, None, None)
    with native.conversion_guard() as seen:
        public.sync(public_call())
    assert seen == []
    samples = {"own": [], "public": []}
    for _ in range(3):  # interleaved blocks
        for name, call, sync in (("own", own_call, own.sync), ("public", public_call, public.sync)):
            samples[name] += timing.measure(call, sync, min_rounds=15, max_rounds=15, max_time=0, warmup=2).samples
    from gpt2_conformance.bench.stats import summary

    a, b = summary(samples["own"]), summary(samples["public"])
    spread = max(a["iqr"], b["iqr"], 0.05 * min(a["median"], b["median"]))
    assert abs(a["median"] - b["median"]) <= spread, (
        f"native path median={b['median'] * 1e3:.3f} ms, but should be within {spread * 1e3:.3f} ms of the own "
        f"hooks' {a['median'] * 1e3:.3f} ms [torch suite mode, {w.group}]")


def test_backend_names_expand_all_and_refuse_unknown_names(tmp_path, capsys):
    from gpt2_conformance import registry

    assert command.backend_names(None) == [b for b in command.own_hooks() if command.installed(b)]
    every = command.backend_names(["all"])
    assert every[0] == "numpy" and set(every) <= set(registry.available())
    assert command.backend_names(["numpy", "numpy", "x.y:z"]) == ["numpy", "x.y:z"]
    with pytest.raises(LookupError, match="'nope': unknown backend"):
        command.backend_names(["nope"])
    args = _args(tmp_path)
    args.backend = ["nope"]
    assert command.run(args) == 2 and "unknown backend" in capsys.readouterr().err


# -- outputs never lose the figures ---------------------------------------------------------
def test_stats_are_pytest_benchmarks_own_formulas():
    from pytest_benchmark.stats import Stats

    from gpt2_conformance.bench.stats import summary

    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 4, 5, 6, 7, 11, 60):
        samples = list(rng.random(n))
        st = Stats()
        for x in samples:
            st.update(x)
        assert summary(samples) == st.as_dict(), f"summary(n={n}) differs from pytest_benchmark.stats.Stats"


def test_a_missing_optional_package_costs_one_output_and_a_line(tmp_path, monkeypatch, capsys):
    """README command 1's environment minus pytest-benchmark and matplotlib (issue 12 part 3):
    every figure is still written, the PNGs each cost one clear line, and the run succeeds."""
    rows_seen = {}

    def fake_child(request, log_dir, timeout):
        res = _result(workloads=[wl.Workload("forward", "prefill", 8, 1024, 768),
                                 wl.Workload("step", "decode", 1, 1, 768, 512)])
        rows_seen["n"] = len(res["records"])
        return res

    for module in ("pytest_benchmark", "pytest_benchmark.stats", "pytest_benchmark.plugin", "matplotlib",
                   "matplotlib.pyplot"):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ModuleNotFoundError
    monkeypatch.setattr(command, "run_child", fake_child)
    assert command.run(_args(tmp_path, "--quick")) == 0
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
    res = _result()
    rows = verdict.workload_rows([res])
    monkeypatch.setattr(table.MarkdownReport, "render", lambda *a: 1 / 0)
    said = []
    paths = files.write_all([res], rows, {"device": "cpu", "root": "."}, str(tmp_path), say=said.append)
    assert "markdown" not in paths and {"raw", "json"} <= set(paths)
    assert said == ["bench: no bench.md: ZeroDivisionError: division by zero; the other outputs are written"]


def test_decode_step_table_and_plot(tmp_path):
    step, fwd, head = (wl.Workload("step", "decode", 1, 1, 768, 512), wl.Workload("forward", "decode", 1, 1, 768, 512),
                       wl.Workload("logits", "decode", 1, 1, 768, 512))
    fast = _result("hf-transformers", median=0.005, workloads=[step, fwd, head], modes=("bridge", "native"))
    slow = _result("keras-hub-jax", median=0.099, workloads=[step], modes=("native",))
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


# -- each row's limit: the same bytes, the same cache state, this process --------------------
def test_limits_match_each_workloads_bytes_and_cache_state(monkeypatch):
    """On a fake machine with a 32 MiB LLC (issue 12's): the flush reads 256 MiB, and every
    workload gets a reference moving its own least bytes, cold ones with the flush before each
    round, warm ones without."""
    from gpt2_conformance.bench import bandwidth, cache

    monkeypatch.setattr(cache, "llc_bytes", lambda root=None: 32 << 20)
    assert cache.flush_bytes(cache.llc_bytes()) == 256 << 20
    calls = []
    monkeypatch.setattr(bandwidth, "matched", lambda read, write, flush=None: calls.append((read, write, flush))
                        or {"read": read, "write": write, "gbps": 10.0, "gbps_min": 9.0, "gbps_max": 11.0,
                            "cache": "warm" if flush is None else "cold", "threads": 1})
    warm, cold, step = (wl.Workload("forward", "prefill", 8, 1024, 768),
                        wl.Workload("forward", "prefill", 8, 1024, 768, cache="cold"),
                        wl.Workload("step", "decode", 1, 1, 768, 512))
    flush = object()
    limits = child.workload_limits([warm, cold, step], flush)
    u = child.distinct_ids(warm)
    assert 7000 < u < 8192  # the drawn ids repeat: fewer rows to read than tokens
    assert calls == [(*wl.traffic(warm, u), None), (*wl.traffic(cold, u), flush), (*wl.traffic(step, 1), None)]
    assert limits[cold.group]["cache"] == "cold" and limits[warm.group]["distinct_ids"] == u


def test_matched_reference_moves_the_bytes_it_says():
    from gpt2_conformance.bench import bandwidth

    for read, write in ((3 << 20, 1 << 20), (1 << 20, 3 << 20), (2 << 20, 2 << 20)):
        for reader in bandwidth.READERS:
            runs, moved = bandwidth._streams(read, write, 2, reader)
            assert moved == read + write and len(runs) == 2
            for run in runs:
                run()
    out = bandwidth.matched(3 << 20, 1 << 20, rounds=3, max_time=0)
    assert out["cache"] == "warm" and out["gbps"] > 0 and out["read"] == 3 << 20
    assert out["gbps"] == max(out["one_thread_gbps"], out.get("all_cores_gbps", 0)) and out["reader"] in bandwidth.READERS
    with pytest.raises(ValueError, match="matched.read=-1"):
        bandwidth.matched(-1, 8)


def test_no_numpy_row_exceeds_its_limit_on_this_machine():
    """A real (small) run of the numpy reference, warm and cold: every row's least bytes over
    its time stay under its own matched limit (the physical claim behind "% of the limit")."""
    plan = [wl.Workload("forward", "prefill", 8, 1024, 768), wl.Workload("forward", "prefill", 8, 1024, 768, cache="cold"),
            wl.Workload("forward", "decode", 64, 1, 768, 512), wl.Workload("logits", "decode", 1, 1, 768, 512)]
    request = {"backend": "numpy", "device": "cpu", "workloads": [w.as_dict() for w in plan],
               "bandwidth_bytes": 64 << 20, "min_rounds": 5, "max_rounds": 9, "max_time": 0.2, "warmup": 1,
               "modes": ["suite", "take-out"]}
    result = child.run(request)
    rows = verdict.workload_rows([result])
    assert len([r for r in rows if "stats" in r]) >= 5
    assert verdict.model_errors(rows) == [], verdict.model_errors(rows)
