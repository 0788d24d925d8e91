"""Digests of float32 tables and their comparison with the real GPT-2 tables.

- sha256 of the float32 little-endian row-major bytes (the layout of HF exports and of the
  WebGPT Git-LFS objects whose oids are the reference sha256 values).
- TF's masked crc32c (Castagnoli) of the same bytes, as stored for every tensor in a TF
  checkpoint index (tensorflow/core/lib/hash/crc32c.h: Mask). crc32c is computed here in
  numpy: many chunks advance in parallel (slicing-by-4 tables), then the chunk CRCs are
  combined with the GF(2) "append n zero bytes" operator. No compiled extension is needed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from gpt2_conformance.runtime.numerics import first_index

_POLY = 0x82F63B78  # crc32c, reflected
_MASK_DELTA = 0xA282EAD8


def _tables() -> np.ndarray:
    """T[k][b]: crc of byte b followed by k zero bytes (slicing-by-4 tables)."""
    t = np.zeros((4, 256), np.uint32)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (_POLY if c & 1 else 0)
        t[0, b] = c
    for k in range(1, 4):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


_T = _tables()
_X16 = np.arange(1 << 16, dtype=np.uint32)
_U_LO = _T[3][_X16 & 0xFF] ^ _T[2][_X16 >> 8]  # the first two bytes of a 4-byte word
_U_HI = _T[1][_X16 & 0xFF] ^ _T[0][_X16 >> 8]  # the last two


def _raw_scalar(data: bytes, crc: int = 0) -> int:
    """Raw CRC register update (no init / final xor), byte by byte: for short inputs."""
    t0 = _T[0]
    for byte in data:
        crc = int(t0[(crc ^ byte) & 0xFF]) ^ (crc >> 8)
    return crc


def _zero_operator(nbytes: int) -> list[int]:
    """Columns of the 32x32 GF(2) matrix that advances a raw CRC register over nbytes zeros."""

    def apply(cols, v):
        out = 0
        for i in range(32):
            if v >> i & 1:
                out ^= cols[i]
        return out

    one_byte = [_raw_scalar(b"\0", 1 << i) for i in range(32)]
    result = [1 << i for i in range(32)]  # identity
    power = one_byte
    while nbytes:
        if nbytes & 1:
            result = [apply(power, c) for c in result]
        power = [apply(power, c) for c in power]
        nbytes >>= 1
    return result


def _apply_operator(cols: list[int], v: np.ndarray) -> np.ndarray:
    out = np.zeros_like(v)
    for i, col in enumerate(cols):
        out ^= np.where((v >> np.uint32(i)) & np.uint32(1), np.uint32(col), np.uint32(0))
    return out


def _raw_parallel(data: np.ndarray, lanes: int) -> int:
    """Raw CRC of `data` (uint8, length a multiple of 4 * lanes) split into `lanes` chunks."""
    words = data.view("<u4").reshape(lanes, -1)
    crc = np.zeros(lanes, np.uint32)
    low, sixteen = np.uint32(0xFFFF), np.uint32(16)
    for j in range(words.shape[1]):  # slicing-by-4 with two 16-bit tables
        c = crc ^ words[:, j]
        crc = _U_LO[c & low] ^ _U_HI[c >> sixteen]
    chunk = words.shape[1] * 4
    while crc.size > 1:  # pairwise: crc(a || b) = shift(crc(a), len(b)) ^ crc(b)
        crc = _apply_operator(_zero_operator(chunk), crc[0::2]) ^ crc[1::2]
        chunk *= 2
    return int(crc[0])


def crc32c(data) -> int:
    """Standard crc32c (init and final xor 0xFFFFFFFF) of bytes or a numpy array's bytes."""
    buf = (
        np.frombuffer(memoryview(data).cast("B"), np.uint8)
        if not isinstance(data, np.ndarray)
        else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    )
    n = buf.size
    if n < 1 << 16:
        raw = _raw_scalar(buf.tobytes())
    else:
        lanes = 1 << max(4, min(12, (n >> 14).bit_length()))  # chunks of >= 4 KiB
        block = 4 * lanes
        pad = (-n) % block  # leading zero bytes leave a raw (init 0) register at 0
        padded = np.concatenate([np.zeros(pad, np.uint8), buf]) if pad else buf
        raw = _raw_parallel(padded, lanes)
    init_effect = _apply_operator(_zero_operator(n), np.array([0xFFFFFFFF], np.uint32))[0]
    return (raw ^ int(init_effect)) ^ 0xFFFFFFFF


def mask(crc: int) -> int:
    """TF's crc32c::Mask: rotate right by 15 and add a constant."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def le_bytes(table: np.ndarray) -> np.ndarray:
    """The float32 little-endian row-major bytes the reference digests are of."""
    if table.dtype.kind != "f" or table.dtype.itemsize != 4:
        raise ValueError(f"digests are defined for float32 tables, got {table.dtype}")
    return np.ascontiguousarray(table, dtype="<f4").reshape(-1).view(np.uint8)


def sha256(table: np.ndarray) -> str:
    return hashlib.sha256(le_bytes(table).data).hexdigest()


def tf_masked_crc32c(table: np.ndarray) -> int:
    return mask(crc32c(le_bytes(table)))


@dataclass(frozen=True)
class Difference:
    """How a table differs from a reference table of the same shape (bit comparison)."""

    n_differ: int
    n_total: int
    max_abs_diff: float
    first_index: tuple[int, ...] | None
    first_value: float | None
    first_reference: float | None

    @property
    def identical(self) -> bool:
        return self.n_differ == 0

    def describe(self, name: str) -> str:
        if self.identical:
            return f"all {self.n_total} elements of {name} are bit-identical to the real table"
        # compare() sets the first_* fields wherever an element differs
        assert self.first_index is not None and self.first_value is not None and self.first_reference is not None
        idx = ", ".join(map(str, self.first_index))
        return (
            f"{self.n_differ} of {self.n_total} elements of {name} differ from the real table, "
            f"max |diff| {self.max_abs_diff:.3g}; first at {name}[{idx}] = {self.first_value!r} "
            f"(real {self.first_reference!r}, {_ulps(self.first_value, self.first_reference)})"
        )


def _ulps(a: float, b: float) -> str:
    ia, ib = (int(np.array(x, np.float32).view(np.int32)) for x in (a, b))
    ia, ib = (i if i >= 0 else -(i & 0x7FFFFFFF) for i in (ia, ib))  # ordered int representation
    n = abs(ia - ib)
    return f"{n} ulp{'s' if n != 1 else ''} apart"


def compare(table: np.ndarray, reference: np.ndarray) -> Difference:
    """Element-wise bit comparison; shapes must agree."""
    if table.shape != reference.shape:
        raise ValueError(f"shape {table.shape} differs from the reference shape {reference.shape}")
    a = np.ascontiguousarray(table, np.float32)
    r = np.ascontiguousarray(reference, np.float32)
    differ = a.view(np.uint32) != r.view(np.uint32)
    n = int(differ.sum())
    if not n:
        return Difference(0, differ.size, 0.0, None, None, None)
    idx = first_index(differ)
    with np.errstate(invalid="ignore"):
        diff = np.abs(a[differ].astype(np.float64) - r[differ].astype(np.float64))
    worst = float(np.nanmax(diff)) if np.isfinite(diff).any() else float("nan")
    return Difference(n, differ.size, worst, idx, float(a[idx]), float(r[idx]))
