"""What every checkpoint reader returns and raises: one module the format readers
(readers.py, gguf_reader.py) share, so neither imports the other to get them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


class CheckpointError(ValueError):
    """A checkpoint that cannot be used, with the file, the tensor and the rule."""

    def __init__(self, path: str, message: str, tensor: str | None = None):
        self.path, self.tensor = path, tensor
        where = f"{path}: tensor {tensor!r}: " if tensor else f"{path}: "
        super().__init__(where + message)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str  # numpy dtype name ("float32"), or the format's name for types numpy lacks
    shape: tuple[int, ...]
    load: Callable[[], np.ndarray]


@dataclass(frozen=True)
class Checkpoint:
    path: str
    format: str
    wte: np.ndarray
    wpe: np.ndarray
    wte_name: str
    wpe_name: str
    size: str  # "124M", ...
    n_embd: int
    wte_dtype: str = "float32"  # as stored; a GGUF may store F16/BF16/Q8_0/..., read as float32
    wpe_dtype: str = "float32"

    def stored_dtype(self, table: str) -> str:
        return {"wte": self.wte_dtype, "wpe": self.wpe_dtype}[table]

    @property
    def dequantised(self) -> tuple[str, ...]:
        """The tables stored in another type than float32 (their float32 values are dequantised)."""
        return tuple(t for t in ("wte", "wpe") if self.stored_dtype(t) != "float32")

    def describe(self) -> str:
        if not self.dequantised:
            return (
                f"{self.path} ({self.format}; {self.wte_name} {list(self.wte.shape)}, {self.wpe_name} "
                f"{list(self.wpe.shape)}, float32: GPT-2 {self.size} by shape)"
            )
        tables = ", ".join(
            f"{name} {list(shape)} {dtype}"
            for name, shape, dtype in (
                (self.wte_name, self.wte.shape, self.wte_dtype),
                (self.wpe_name, self.wpe.shape, self.wpe_dtype),
            )
        )
        return f"{self.path} ({self.format}; {tables}, dequantised to float32: GPT-2 {self.size} by shape)"


def wrap(path: str, tensor: str | None, exc: BaseException) -> CheckpointError:
    if isinstance(exc, CheckpointError):
        return exc
    hint = " (the stored checksum does not match: the file is corrupted)" if "CRC" in str(exc) else ""
    return CheckpointError(path, f"{type(exc).__name__}: {exc}{hint}", tensor)
