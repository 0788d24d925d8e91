"""Native bench hooks: how any implementation gives `gpt2-conformance bench` its own callables,
so it is timed on its framework's tensors, on its device, with its own synchronisation, and
no numpy inside the timed call (the Adapter API converts to and from numpy on every call).

An adapter opts in with one method (the bench looks for it; the suite never calls it):

    from gpt2_conformance.api.bench import NativeBench

    class MyAdapter(Adapter):
        ...
        def native_bench(self, device):            # device: "cpu" or "gpu"
            return NativeBench(put=torch.from_numpy,              # numpy -> tensor, once, untimed
                               forward=self.model.embed,          # (ids, past_length) -> h
                               logits=self.model.head,            # h -> logits (optional)
                               sync=lambda out: out)              # wait for the device (GPU)

The project's own backends keep these hooks beside their adapter instead: a function
`native_bench(adapter, device)` in the bench.py next to adapter.py (backends/torch/bench.py,
backends/thirdparty/<name>/bench.py), found the same way for a plug-in that ships one. With
neither, the bench times the Adapter API only (mode "bridge").

The bench then times, per workload: forward(ids, past_length), logits(h), and for a decode
step forward then logits in one call (or the engine's own step, where it gives `step`: a head
that runs only inside generation), each as sync(call()), with ids, h (and dh for backward) put
on the device once before timing. tests/bench/test_native_hooks.py runs every built-in native hook
under conversion_guard() below, which fails on any numpy conversion inside the call.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from contextlib import contextmanager
from gpt2_conformance.api.adapter import Adapter
from gpt2_conformance.api.bench import NativeBench

ENTRY = "native_bench"  # the adapter method, or the function in the sibling bench.py


def _sibling_module(adapter_type: type):
    """The bench.py beside the adapter's module, or None."""
    package = adapter_type.__module__.rpartition(".")[0]
    if not package:
        return None
    name = f"{package}.bench"
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except (ImportError, ValueError):
        return None
    return importlib.import_module(name)


def has_native(factory) -> bool:
    """Whether an adapter class (or factory) brings native hooks, without building one."""
    if hasattr(factory, ENTRY):
        return True
    module = _sibling_module(factory) if isinstance(factory, type) else None
    return module is not None and hasattr(module, ENTRY)


def native_available(factory, device: str) -> tuple[bool, str]:
    """(ok, why not) for timing natively on device: the sibling module's native_available(device)
    where it has one (it may move a CPU-only adapter's model to a GPU its framework sees), else
    the adapter's claimed devices."""
    module = _sibling_module(factory) if isinstance(factory, type) else None
    if module is not None and hasattr(module, "native_available"):
        return module.native_available(device)
    from gpt2_conformance.api.adapter import capabilities_of

    devices = capabilities_of(factory).devices
    return (True, "") if device in devices else (False, f"the adapter does not claim device {device!r} ({devices})")


def find(adapter: Adapter, device: str) -> NativeBench | None:
    """The adapter's NativeBench for device, or None where it brings none."""
    method = getattr(adapter, ENTRY, None)
    if method is not None:
        return _checked(method(device), type(adapter))
    module = _sibling_module(type(adapter))
    if module is not None and hasattr(module, ENTRY):
        return _checked(getattr(module, ENTRY)(adapter, device), type(adapter))
    return None


def _checked(nb, where: type) -> NativeBench:
    if not isinstance(nb, NativeBench):
        raise TypeError(f"{where.__name__}.native_bench returned {type(nb).__name__}, but should return a "
                        "gpt2_conformance.api.bench.NativeBench")
    for name in ("put", "forward", "sync"):
        if not callable(getattr(nb, name)):
            raise TypeError(f"{where.__name__}.native_bench: NativeBench.{name}={getattr(nb, name)!r}, but should be "
                            "callable")
    return nb


# -- proof that a timed native call converts nothing ---------------------------------------
# Python-level calls that move data between numpy and a framework (or back to the host).
# sys.setprofile sees every call made from Python code, C functions and methods included
# (torch.from_numpy, Tensor.numpy, np.asarray, ...); what frameworks do inside their own C++
# is not a numpy conversion of the adapter's making.
CONVERSIONS = frozenset({
    "from_numpy", "numpy", "__array__", "tolist", "to_numpy", "_numpy", "convert_to_numpy", "device_put",
    "device_get",
})
# numpy's own constructors, which frameworks also call on shapes, dtypes and Python scalars
# (Keras and JAX do so on every eager op): one counts as a conversion when numpy allocated at
# least this many bytes of array data during it (numpy reports its data to tracemalloc).
NUMPY_CONSTRUCTORS = frozenset({"asarray", "array", "ascontiguousarray", "asanyarray", "copy"})
# (function, module) whose numpy conversion happens inside C++: ONNX Runtime's numpy-in,
# numpy-out InferenceSession.run (its OrtValue path is run_with_ort_values)
CONVERTING_CALLS = frozenset({("run", "onnxruntime.capi.onnxruntime_inference_collection")})
CONSTRUCTOR_BYTES = 256


@contextmanager
def conversion_guard():
    """Records the conversions made while the block runs (the calls in CONVERSIONS, and numpy
    constructors that allocated CONSTRUCTOR_BYTES or more): yields the list it fills with
    (function name, module or type) pairs. Use inputs of more than CONSTRUCTOR_BYTES."""
    import tracemalloc

    seen: list[tuple[str, str]] = []
    pending: list[tuple[object, int]] = []
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()

    def where(arg):
        owner = getattr(arg, "__self__", None)
        return getattr(arg, "__module__", None) or type(owner).__name__

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_code.co_name
            module = frame.f_globals.get("__name__", "?")
            if name in CONVERSIONS or (name, module) in CONVERTING_CALLS:
                seen.append((name, module))
        elif event == "c_call":
            name = getattr(arg, "__name__", "")
            if name in CONVERSIONS:
                seen.append((name, where(arg)))
            elif name in NUMPY_CONSTRUCTORS:
                pending.append((arg, tracemalloc.get_traced_memory()[0]))
        elif event in ("c_return", "c_exception") and pending and pending[-1][0] is arg:
            _, before = pending.pop()
            if tracemalloc.get_traced_memory()[0] - before >= CONSTRUCTOR_BYTES:
                seen.append((arg.__name__, where(arg)))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)
        if started:
            tracemalloc.stop()
