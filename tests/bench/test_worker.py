"""One implementation's worker (worker.py), driven in this process at tiny shapes (the plumbing,
no speed), and as a process through session.py: the numpy hooks compute the spec and keep their
check, the limit streams its workload's bytes, an adapter without hooks is timed through the
Adapter API, a GPU is skipped with a reason on a CPU-only machine, and a worker that crashes
costs its rows, not the run."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from gpt2_conformance import registry
from gpt2_conformance.api import gpt2
from gpt2_conformance.bench import session, worker
from gpt2_conformance.bench import workloads as wl
from helpers import bench_adapters

DECODE = wl.Workload("forward", "decode", 2, 1, 768, 3)
STEP = wl.Workload("step", "decode", 1, 1, 768, 3)
BACKWARD = wl.Workload("backward", "decode", 2, 1, 768, 3)


def _prepared(backend: str, plan, modes=None, device="cpu"):
    """(worker, its hello, the rows of every workload in plan, each with its group); the worker
    keeps the last workload's calls only."""
    w = worker.Worker()
    info = w.hello(backend, device)
    rows = []
    for x in plan if not info.get("skipped") else ():
        rows += [dict(r, group=x.group) for r in w.prepare(x.as_dict(), modes or list(info["modes"]))["rows"]]
    return w, info, rows


def test_the_numpy_worker_prepares_and_times_every_mode_it_has():
    w, info, rows = _prepared("numpy", [DECODE, STEP])
    assert list(info["modes"]) == list(wl.modes_of("numpy")) and info["suite_mode"] == "suite"
    timed = {(r["mode"], r["group"]) for r in rows if "first_call_s" in r}
    # every mode times the forward; only the suite mode has a head, so only it times the step
    assert timed == {(m, DECODE.group) for m in info["modes"]} | {("suite", STEP.group)}, timed
    block = w.time(worker.key_of("suite", STEP), seconds=0.01, lead_in=0.0)
    assert len(block["samples"]) >= 3 and all(s > 0 for s in block["samples"])


def test_numpy_hooks_compute_the_spec_and_keep_their_check():
    from gpt2_conformance.backends.numpy import bench

    wte = np.arange(gpt2.N_VOCAB * 4, dtype=np.float32).reshape(-1, 4)
    wpe = np.ones((gpt2.N_CTX, 4), np.float32)
    ids = np.array([[0, 50256, 7]], np.int32)
    expect = wte[ids] + wpe[5:8][None]
    for mode in bench.MODES:
        r = bench.Runner(wte, wpe, mode, "cpu")
        out = r.make(wl.Workload("forward", "prefill", 1, 3, 4, 5), ids, 5)()
        np.testing.assert_array_equal(out, expect)
        bad = r.make(wl.Workload("forward", "prefill", 1, 1, 4, 0), np.array([[50257]], np.int32), 0)
        if bench.CHECK[mode].startswith("on"):
            with pytest.raises(Exception, match="50257"):
                bad()
        else:  # the comparison-only mode: np.take(mode="clip") reads the last row, silently
            np.testing.assert_array_equal(bad(), wte[[[50256]]] + wpe[:1][None])


def test_the_limit_streams_each_workloads_own_bytes():
    from gpt2_conformance.api import machine

    threads = sorted({1, machine.cores()})
    for workload in (DECODE, STEP):
        w, info, rows = _prepared(worker.LIMIT, [workload])
        assert [r["mode"] for r in rows] == [f"stream-{t}" for t in threads]
        for row in rows:
            assert row["bytes"] == wl.bytes_moved(workload, row["distinct_ids"]), row
            assert len(w.time(row["key"], seconds=0.0, lead_in=0.0)["samples"]) >= 3


def test_the_streaming_reference_moves_the_bytes_it_says():
    """Copy, then a read pass or a fill: the buffers it touches add up to R read and W written."""
    from gpt2_conformance.bench import bandwidth

    for read, write in ((4096, 4096), (40960, 4096), (4096, 40960)):
        pieces = bandwidth._pieces(read, write, 2, "max")
        assert len(pieces) == 2
        for run in pieces:
            run()
    with pytest.raises(ValueError, match="move at least 8 bytes"):
        bandwidth.stream(0, 4, 1, "max", None)


def test_an_adapter_without_hooks_is_timed_through_the_adapter_api():
    w, info, rows = _prepared(bench_adapters.PLAIN_NUMPY_SPEC, [DECODE, BACKWARD, STEP])
    assert list(info["modes"]) == ["bridge"]
    assert {r["group"] for r in rows if "first_call_s" in r} == {DECODE.group, STEP.group}, (
        "the bridge times no backward (Adapter.gradients also takes a logits cotangent)"
    )
    _, gpu, _ = _prepared(bench_adapters.PLAIN_NUMPY_SPEC, [DECODE], device="gpu")
    assert "does not claim device 'gpu'" in gpu["skipped"]


def test_the_native_method_of_an_adapter_is_timed_beside_the_bridge():
    w, info, rows = _prepared(bench_adapters.NATIVE_NUMPY_SPEC, [DECODE, STEP])
    assert list(info["modes"]) == ["native", "bridge"] and info["fastest_mode"] == "native"
    assert {(r["mode"], r["group"]) for r in rows if "first_call_s" in r} == {
        (m, g) for m in ("native", "bridge") for g in (DECODE.group, STEP.group)
    }


def test_the_gpu_path_is_skipped_with_a_reason_on_a_cpu_machine():
    _, info, rows = _prepared("numpy", [DECODE], device="gpu")
    assert rows == [] and "GPU" in info["skipped"]
    if importlib.util.find_spec("torch"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
        _, info, _ = _prepared("torch", [DECODE], device="gpu")
        assert "no GPU" in info["skipped"]


def test_a_worker_that_crashes_costs_its_rows_and_names_the_signal(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(registry_tests_dir()))
    crash = session.Side("crash", bench_adapters.CRASHING_NUMPY_SPEC, None)
    fine = session.Side("numpy", "numpy", ["suite"])
    sides = [crash, fine]
    session.start(sides, "cpu", str(tmp_path), timeout=120, cohorts=2)
    try:
        rows = session.prepare(sides, wl.Workload("forward", "prefill", 1, 4, 768))
        session.alternate(rows, rounds=4, seconds=0.005, lead_in=0.0)
        rows += session.prepare(sides, DECODE)
        session.alternate(rows[-1:], rounds=4, seconds=0.005, lead_in=0.0)
    finally:
        session.stop(sides)
    assert "signal 11" in crash.error and crash.label in crash.error, crash.error
    numpy_rows = [r for r in rows if r.side is fine]
    assert numpy_rows and all(not r.error and len(r.blocks) == 4 for r in numpy_rows), [
        (r.name, r.error) for r in numpy_rows
    ]


def registry_tests_dir():
    import pathlib

    return pathlib.Path(bench_adapters.__file__).resolve().parent.parent


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_fastest_mode_keeps_the_bounds_check(backend):
    """A backend's default mode in the ranking must still refuse a bad id (XLA drops TF's asserts
    inside a jit_compile cluster; the xla mode keeps its check outside the cluster)."""
    pytest.importorskip(backend)
    hooks = importlib.import_module(registry.entry(backend).bench_module)
    wte = np.arange(gpt2.N_VOCAB * 4, dtype=np.float32).reshape(-1, 4)
    wpe = np.ones((gpt2.N_CTX, 4), np.float32)
    r = hooks.Runner(wte, wpe, hooks.FASTEST_MODE, "cpu")
    w = wl.Workload("forward", "prefill", 1, 2, 4, 3)
    ids = np.array([[1, 50256]], np.int32)
    out = np.asarray(r.sync(r.make(w, r.put(ids), 3)()))
    np.testing.assert_array_equal(out[: ids.size].reshape(1, 2, 4), wte[ids] + 1)
    for bad in ([[1, 50257]], [[-1, 2]]):
        with pytest.raises(Exception, match="outside the wte table"):
            r.sync(r.make(w, r.put(np.array(bad, np.int32)), 3)())


@pytest.mark.parametrize("backend", ["numpy", "torch", "tensorflow", "jax"])
def test_unchecked_modes_compute_the_same_h(backend):
    """The modes without their check (CHECK "OFF") time the same gather + add: on valid ids,
    wte[ids] + wpe[p:p+T] bit for bit. (JAX's forward returns its kernel's flat rows, padded to a
    power of two: the first B*T rows are h.)"""
    pytest.importorskip(backend)
    hooks = importlib.import_module(registry.entry(backend).bench_module)
    unchecked = [m for m, check in hooks.CHECK.items() if check.startswith("OFF")]
    assert unchecked, f"{backend} has no unchecked mode to show the check's cost"
    wte = np.arange(gpt2.N_VOCAB * 4, dtype=np.float32).reshape(-1, 4)
    wpe = np.arange(gpt2.N_CTX * 4, dtype=np.float32).reshape(-1, 4) / 7
    ids = np.array([[1, 50256, 9]], np.int32)
    for mode in unchecked:
        r = hooks.Runner(wte, wpe, mode, "cpu")
        out = np.asarray(r.sync(r.make(wl.Workload("forward", "prefill", 1, 3, 4, 3), r.put(ids), 3)()))
        np.testing.assert_array_equal(
            out[:3].reshape(1, 3, 4) if out.ndim == 2 else out, wte[ids] + wpe[3:6][None], err_msg=f"{backend} {mode}"
        )
