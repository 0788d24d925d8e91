"""The bench protocol: the callables an implementation hands `gpt2-conformance bench` so it is
timed on its framework's own tensors, with its own synchronisation (gpt2_conformance/bench/native.py
finds and checks them; its docstring shows an adapter opting in)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


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
