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
under a guard that fails on any numpy conversion inside the call.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpt2_conformance.api.adapter import Adapter


def _identity(out):
    return out


@dataclass
class NativeBench:
    """The callables the bench times for one implementation instance (module docstring)."""

    put: Callable[[Any], Any]  # numpy array -> framework tensor on the timed device (untimed)
    forward: Callable[[Any, int], Any]  # (ids tensor [B, T], past_length int) -> h tensor
    logits: Callable[[Any], Any] | None = None  # h tensor [B, T, d] -> logits tensor; None: not timed
    backward: Callable[[Any, int, Any], Any] | None = None  # (ids, past_length, dh) -> (dwte, dwpe)
    # (ids [B, 1], past_length) -> logits: the engine's own whole decode step, for an engine that
    # runs its head only inside one (no head for a given h); timed for the decode step instead
    # of forward then logits, and its description must say what else the step does
    step: Callable[[Any, int], Any] | None = None
    sync: Callable[[Any], Any] = field(default=_identity)  # waits until the device has computed out
    description: str = ""  # what is timed, in a few words (shown in the report's Modes section)
    threads: str = ""  # the framework's thread setting, if it has one


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
    """(ok, why not) for timing natively on device: the adapter class's own native_available(device)
    (a classmethod: one adapter family on several frameworks), else the sibling module's, where
    there is one (it may move a CPU-only adapter's model to a GPU its framework sees), else the
    adapter's claimed devices."""
    own = getattr(factory, "native_available", None)
    if callable(own):
        return own(device)
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
        raise TypeError(
            f"{where.__name__}.native_bench returned {type(nb).__name__}, but should return a "
            "gpt2_conformance.api.bench.NativeBench"
        )
    for name in ("put", "forward", "sync"):
        if not callable(getattr(nb, name)):
            raise TypeError(
                f"{where.__name__}.native_bench: NativeBench.{name}={getattr(nb, name)!r}, but should be callable"
            )
    return nb
