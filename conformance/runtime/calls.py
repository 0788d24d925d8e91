"""A call in the suite's own words, for every FAIL line and every replay:

    embed(ids=int64[3, 17] reversed view (strides=(-136, -8)) in [0, 50256], past_length=array(517))

An array's memory layout is named (the suite hands each layout in on purpose, runtime/strategies.py
LAYOUTS), and past_length is shown by its repr, so np.int64(5) and array(5) show their form."""

from __future__ import annotations

import numpy as np


def layout_of(array: np.ndarray) -> str:
    """Which of the layouts callers pass this is; "" for a writable C-contiguous array."""
    tags = []
    strides = f"strides={array.strides}"
    if any(s < 0 for s in array.strides):
        tags.append(f"reversed view ({strides})")
    elif not array.flags.c_contiguous:
        if array.flags.f_contiguous:
            tags.append("Fortran order")
        elif array.ndim and array.strides[-1] == 2 * array.itemsize:
            tags.append(f"every-other-column view ({strides})")
        else:
            tags.append(f"column view ({strides})")
    if not array.flags.writeable:
        tags.append("read-only")
    return " ".join(tags)


def describe_ids(ids: np.ndarray) -> str:
    layout = layout_of(ids)
    text = f"{ids.dtype}{list(ids.shape)}" + (f" {layout}" if layout else "")
    if ids.size == 0 or not np.issubdtype(ids.dtype, np.number):
        return text
    return f"{text} in [{ids.min()}, {ids.max()}]"


def describe_array(a) -> str:
    """float32[2, 6, 768] for an array argument other than ids (h_final, cotangents, tables),
    with its layout where it is not a plain C-contiguous one (the suite's own tables are read-only)."""
    if not isinstance(a, np.ndarray):
        return repr(a)
    layout = layout_of(a).replace("read-only", "").strip() if a.flags.c_contiguous else layout_of(a)
    return f"{a.dtype}{list(a.shape)}" + (f" {layout}" if layout else "")


def describe_call(method: str, ids: np.ndarray | None = None, past_length=None, **more) -> str:
    parts = []
    if ids is not None:
        parts.append(f"ids={describe_ids(ids) if isinstance(ids, np.ndarray) else repr(ids)}")
    if past_length is not None:
        parts.append(f"past_length={past_length!r}")  # repr: np.int64(5) and array(5) show their form
    parts += [f"{k}={v}" for k, v in more.items()]
    return f"{method}({', '.join(parts)})"
