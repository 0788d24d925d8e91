"""STATE-NO-SIDE-EFFECTS' evidence, kept by the guard around every adapter call.

A conforming embedding is a pure read. The guard keeps a private copy of every array it passes
(ids, h_final, cotangents) and of every array it is given back (h, logits, gradients), and
after each later call compares them. What changed is recorded, for the STATE clause to report,
and undone, so that one defect of this kind fails that clause rather than every clause whose
inputs or earlier answers were changed under it:

- an argument the adapter wrote into is restored from the private copy;
- an output the adapter hands back again (one reused buffer) is restored, and the caller gets
  a copy of the new answer, so an h returned earlier stays what it was.

The tables a test passes to load_tables are watched row by row through assign_wte_row (an
adapter that kept the caller's arrays instead of copying writes into them there): comparing
two 154 MB tables after every call would cost more than the clauses themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpt2_conformance.runtime.numerics import first_index

KEPT_OUTPUTS = 4  # answers watched: a reused buffer shows at the next call of its shape
# ...holding at most this many bytes (each answer and its copy; the newest answer always):
# one gradients() answer at d = 768 and the small ones. Four [V, d] answers kept alive by the
# suite's shared adapter raised every later test's peak by 1.2 GB, and fresh memory is what
# a suite run spends most on.
KEPT_BYTES = 400 << 20


@dataclass(frozen=True)
class SideEffect:
    what: str  # `ids[0, 0:4] was [...], after embed() it is [...] (...): the adapter wrote into its input`
    call: str  # the call after which it was seen, in the suite's form

    def __str__(self) -> str:
        return f"{self.what} [{self.call}]"


def _window(array: np.ndarray, index: tuple) -> tuple[str, slice]:
    """`name[i, j, k:k+4]`-style text and the slice of the last axis it shows."""
    last = index[-1]
    stop = min(last + 4, array.shape[-1])
    return ", ".join([*map(str, index[:-1]), f"{last}:{stop}" if stop - last > 1 else str(last)]), slice(last, stop)


def describe_change(name: str, saved: np.ndarray, now: np.ndarray, after: str, of: str = "") -> str:
    """`ids[0, 0:4] was [11, 12, 13, 14], after embed() it is [14, 13, 12, 11]`."""
    if saved.shape != now.shape:
        return f"{name}.shape{of} was {saved.shape}, after {after} it is {now.shape}"
    if saved.ndim == 0:
        return f"{name}{of} was {saved.item()!r}, after {after} it is {now.item()!r}"
    differ = _differ(saved, now)
    index = first_index(differ)
    text, cols = _window(saved, index)
    was, now_values = _values(saved[index[:-1]][cols]), _values(now[index[:-1]][cols])
    return (
        f"{name}[{text}]{of} was {was}, after {after} it is {now_values} "
        f"({int(differ.sum())} of {differ.size} elements changed)"
    )


class SideEffectWatch:
    """The private copies of one adapter instance's arguments and answers (module docstring)."""

    def __init__(self) -> None:
        self.found: list[SideEffect] = []  # in the order they happened
        self._outputs: list[
            tuple[str, str, np.ndarray, np.ndarray]
        ] = []  # (what, its call, the caller's array, its copy)
        self._tables: list[tuple[str, np.ndarray]] = []  # load_tables' arguments, as the caller holds them

    # -- arguments ------------------------------------------------------------------------
    @staticmethod
    def keep_arguments(arrays: dict) -> dict:
        return {name: (a, a.copy()) for name, a in arrays.items() if isinstance(a, np.ndarray)}

    def check_arguments(self, kept: dict, call: str) -> None:
        """Each argument is as it was passed; one the adapter wrote into is put back."""
        for name, (array, saved) in kept.items():
            if array.shape != saved.shape or not _same(array, saved):
                self.found.append(
                    SideEffect(
                        f"{describe_change(name, saved, array, _method(call))}: the adapter wrote into its input", call
                    )
                )
                if array.flags.writeable and array.shape == saved.shape:
                    np.copyto(array, saved)

    # -- outputs --------------------------------------------------------------------------
    def hand_back(self, out, what: str, call: str):
        """After a call returned `out`: an earlier answer it changed is recorded and put back, and
        where `out` shares memory with an earlier answer the caller gets a copy of it instead."""
        arrays = [a for a in (out if isinstance(out, tuple) else (out,)) if isinstance(a, np.ndarray)]
        changed, shared = [], False
        for earlier, its_call, array, saved in self._outputs:
            shared = shared or any(np.may_share_memory(array, a) for a in arrays)
            if not _same(array, saved):
                change = describe_change(earlier, saved, array, _method(call), f" returned by {its_call}")
                self.found.append(
                    SideEffect(f"{change}: an answer returned earlier was overwritten (a reused output buffer)", call)
                )
                changed.append((array, saved))
        if shared:  # the new answer is copied out before the earlier one is put back in its buffer
            arrays = [a.copy() for a in arrays]
            out = tuple(arrays) if isinstance(out, tuple) else arrays[0]
        for array, saved in changed:
            if array.flags.writeable:
                np.copyto(array, saved)
        names = [what] if len(arrays) == 1 else [f"{what}[{i}]" for i in range(len(arrays))]
        # the copies made here are the caller's alone: only arrays the adapter handed out are watched
        kept = [] if shared else [(n, call, a, a.copy()) for n, a in zip(names, arrays, strict=False)]
        outputs = (self._outputs + kept)[-KEPT_OUTPUTS * max(len(arrays), 1) :]
        while len(outputs) > len(kept) and sum(entry[2].nbytes + entry[3].nbytes for entry in outputs) > KEPT_BYTES:
            outputs.pop(0)
        self._outputs = outputs
        return out

    # -- tables ---------------------------------------------------------------------------
    def watch_tables(self, wte, wpe) -> None:
        self._tables = [(n, a) for n, a in (("wte", wte), ("wpe", wpe)) if isinstance(a, np.ndarray)]

    def keep_row(self, index) -> list:
        """Row `index` of the caller's tables before an assign_wte_row (it writes only there)."""
        try:
            return [(name, table, table[index].copy()) for name, table in self._tables if name == "wte"]
        except (IndexError, TypeError):
            return []

    def check_row(self, kept: list, index, call: str) -> None:
        for name, table, saved in kept:
            if not _same(table[index], saved):
                change = describe_change(
                    f"{name}[{index}]", saved, table[index], _method(call), " passed to load_tables"
                )
                self.found.append(
                    SideEffect(f"{change}: load_tables kept the caller's array instead of copying it", call)
                )
                if table.flags.writeable:
                    table[index] = saved


def _values(a: np.ndarray) -> str:
    """[11, 12, 13, 14], or floats to 9 significant digits (float32's round trip)."""
    return "[" + ", ".join(f"{v:.9g}" if isinstance(v, float) else str(v) for v in a.tolist()) + "]"


def _method(call: str) -> str:
    """ "embed()" for "embed(ids=..., past_length=5)": the message's verb; the whole call ends it."""
    return call.partition("(")[0] + "()"


def _bits(a: np.ndarray) -> np.ndarray:
    """Elements as unsigned integers of their width: float NaN payloads and -0.0 compare too."""
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "fc" and a.dtype.itemsize in (2, 4, 8) else a


def _differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _bits(a) != _bits(b)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bits."""
    return a.shape == b.shape and a.dtype == b.dtype and not _differ(a, b).any()
