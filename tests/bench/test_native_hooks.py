"""Native bench hooks (the bridge and native modes of an adapter: test_worker.py): a native hook
of the wrong type is named; every built-in
native hook converts nothing to numpy inside a timed call and computes the adapter's h (slow);
the torch reference runs the same kernels through the public native path as through its own
hooks."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from gpt2_conformance.backends.numpy.adapter import NumpyAdapter
from gpt2_conformance.bench import session, worker
from gpt2_conformance.bench import workloads as wl


def test_a_native_hook_of_the_wrong_type_is_named():
    from gpt2_conformance.api import bench as native

    class Wrong(NumpyAdapter):
        def native_bench(self, device):
            return {"forward": None}

    with pytest.raises(TypeError, match="Wrong.native_bench returned dict, but should return a .*NativeBench"):
        native.find(Wrong(), "cpu")


NATIVE_BACKENDS = (
    "torch",
    "hf-transformers",
    "transformer-lens",
    "keras-hub-tensorflow",
    "keras-hub-jax",
    "keras-hub-torch",
    "mlx-lm",
    "onnxruntime-hf",
    "llama-cpp",
    "ctranslate2",
)
NATIVE_CHECK = """
import sys, numpy as np
from gpt2_conformance import registry
from gpt2_conformance.api.adapter import AdapterConfig, capabilities_of
from gpt2_conformance.api import bench as native
from gpt2_conformance.bench.worker import tables
from helpers.conversion_guard import conversion_guard
name = sys.argv[1]
factory = registry.resolve(name)
assert native.has_native(factory), f"{name}: no native hooks"
wte, wpe = tables(768)
adapter = factory(AdapterConfig(768))
adapter.load_tables(wte, wpe)
nb = native.find(adapter, "cpu")
# int64: every adapter takes it. T = 16: MLX's CPU head takes ~10 s a call at T = 128, and
# neither the conversions nor the equality checked depend on T
ids = np.random.default_rng(0).integers(0, 50257, (2, 16)).astype(np.int64)
caches = capabilities_of(factory).kv_cache
for past in (0, 5, 5) if caches else (0, 0):
    t = nb.put(ids)
    head = nb.logits or (lambda h: h)  # a head the hooks do not time (ctranslate2's) is not called
    nb.sync(head(nb.sync(nb.forward(t, past))))  # first calls (caches, traces) outside the guard
    with conversion_guard() as seen:
        h = nb.sync(nb.forward(t, past))
        logits = nb.sync(head(h))
    assert seen == [], f"{name}: numpy conversions inside a native call: {seen}"
    assert type(h).__module__.split(".")[0] != "numpy", f"{name}: native h is {type(h)}"
    if isinstance(h, list) and h and hasattr(h[0], "logits"):  # ctranslate2 GenerationResults: a step's h each
        native_h = np.stack([np.stack([np.asarray(step) for step in result.logits[0]]) for result in h])
    elif hasattr(h, "numpy") and not hasattr(h, "detach"):  # an OrtValue or a tf tensor
        native_h = h.numpy()
    elif hasattr(adapter, "_numpy"):  # keras
        native_h = adapter._numpy(h)
    else:
        native_h = np.asarray(h.detach() if hasattr(h, "detach") else h)
    same = np.array_equal(np.asarray(adapter.embed(ids, past)), native_h)
    assert same, f"{name}: native h differs from the Adapter API's h at past_length={past}"
if nb.step is not None:  # the engine's own decode step (its values: the backend's own tests)
    one = nb.put(ids[:1, :1])
    nb.sync(nb.step(one, 5))
    with conversion_guard() as seen:
        nb.sync(nb.step(one, 5))
    assert seen == [], f"{name}: numpy conversions inside the native decode step: {seen}"
with conversion_guard() as seen:
    adapter.embed(ids, 5 if caches else 0)
assert seen, f"{name}: the guard saw no conversion in the Adapter API's embed, so it proves nothing"
print("ok", name, [n for n, _ in seen][:3])
"""


@pytest.mark.slow  # a process per backend, each importing its framework
@pytest.mark.parametrize("backend", NATIVE_BACKENDS)
def test_native_hooks_convert_nothing_and_compute_the_adapters_h(backend):
    """Every built-in native hook, in its own process (one Keras backend per process): no numpy
    conversion inside a timed forward or head (conversion_guard, shown to catch the bridge's),
    and the same h as the Adapter API, bit for bit."""
    from gpt2_conformance import registry

    missing = registry.missing_framework(backend)
    if missing:
        pytest.skip(f"{backend}: {missing} is not installed")
    done = subprocess.run(
        [sys.executable, "-c", NATIVE_CHECK, backend],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=session.REPO_ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(pathlib.Path(__file__).parents[1])),
    )
    assert done.returncode == 0 and "ok " + backend in done.stdout, (done.stdout + done.stderr)[-3000:]


def test_torch_reference_runs_the_same_kernels_through_the_public_native_path():
    """Fairness without a stopwatch: the torch reference reached as any implementation is
    (adapter + native_bench, put once, native sync) dispatches the same ATen calls, on the same
    shapes, as its own bench.py suite mode, for a forward, a head and a decode step, and gives
    the same bits; nothing converts to numpy inside the call. Equal work is what the timed
    comparison in `bench` relies on; timing it here would only measure the machine's load."""
    pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    from gpt2_conformance.backends.torch import bench as torch_bench
    from gpt2_conformance.bench.adapter_hooks import AdapterHooks
    from helpers.conversion_guard import conversion_guard

    class Trace(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            shapes = [tuple(a.shape) for a in args if hasattr(a, "shape")]
            self.calls.append((str(func), shapes))
            return func(*args, **(kwargs or {}))

    wte, wpe = worker.tables(768)
    own = torch_bench.Runner(wte, wpe, "suite", "cpu")
    hooks = AdapterHooks("gpt2_conformance.backends.torch.adapter:TorchAdapter")
    assert hooks.native and "native" in hooks.MODES
    public = hooks.Runner(wte, wpe, "native", "cpu")
    for w in (
        wl.Workload("forward", "prefill", 2, 16, 768),
        wl.Workload("logits", "decode", 1, 1, 768),
        wl.Workload("step", "decode", 2, 1, 768, 5),
    ):
        ids, _, h = worker.inputs(w)
        runs = []
        for runner in (own, public):
            call = worker.make_call(
                runner, w, runner.put(ids), w.past_length, None, None if h is None else runner.put(h)
            )
            with conversion_guard() as seen, Trace() as trace:
                out = call()
            assert seen == [], f"{w.group}: numpy conversions {seen} inside the timed call"
            runs.append((trace.calls, out))
        (own_calls, own_out), (public_calls, public_out) = runs
        assert own_calls, f"{w.group}: the trace saw no ATen call: it would compare nothing"
        assert public_calls == own_calls, (
            f"native path dispatched {public_calls}, but should dispatch the suite mode's {own_calls} [{w.group}]"
        )
        own_arrays, public_arrays = (
            [o.numpy() for o in (out if isinstance(out, tuple) else (out,))] for out in (own_out, public_out)
        )
        assert all((a.view("u4") == b.view("u4")).all() for a, b in zip(own_arrays, public_arrays, strict=True)), (
            w.group
        )
