"""Proof that a timed native call converts nothing (tests/bench/test_native_hooks.py): a guard
that records every conversion between numpy and a framework made while a block runs."""

from __future__ import annotations

import sys
from contextlib import contextmanager

# Python-level calls that move data between numpy and a framework (or back to the host).
# sys.setprofile sees every call made from Python code, C functions and methods included
# (torch.from_numpy, Tensor.numpy, np.asarray, ...); what frameworks do inside their own C++
# is not a numpy conversion of the adapter's making.
CONVERSIONS = frozenset(
    {
        "from_numpy",
        "numpy",
        "__array__",
        "tolist",
        "to_numpy",
        "_numpy",
        "convert_to_numpy",
        "device_put",
        "device_get",
    }
)
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
