"""The adapter protocol: the small interface a backend implements to be checked.

numpy arrays are the only bridge between the suite and a backend (as in einops'
from_numpy/to_numpy): the suite hands float32 numpy tables and integer numpy ids in and
reads numpy arrays back, so the suite never imports a framework.

A backend says what it claims in `capabilities`; the suite skips every clause that needs
something not claimed and reports it as "not claimed", never as passed.

Minimal adapter (see README): subclass Adapter, set `capabilities`, implement
load_tables, tables, embed and (if tied_head is claimed) logits.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, fields

import numpy as np

from gpt2_conformance.api.gpt2 import N_EMBD_SMALL, SIZES

DTYPES = ("float32", "float16", "bfloat16")
DEVICES = ("cpu", "gpu")


@dataclass(frozen=True)
class Capabilities:
    """What an adapter claims. Each field that is False (or a missing dtype/device/size)
    turns the clauses that need it into "not claimed"."""

    dtypes: tuple[str, ...] = ("float32",)
    devices: tuple[str, ...] = ("cpu",)
    sizes: tuple[int, ...] = tuple(SIZES.values())  # n_embd values the adapter can build
    kv_cache: bool = True  # embed(ids, past_length > 0): positions offset by a cache
    tied_head: bool = True  # logits(h) through the tied wte
    init: bool = True  # init_tables(seed): the implementation's own initialiser
    gradients: bool = False  # gradients(...): through the framework's autodiff
    mutable_tables: bool = True  # assign_wte_row: in-place update, as an optimizer would
    black_box: str = ""  # how h is observed when there is no standalone embedding

    def claims(self, requirement: str) -> bool:
        """requirement is a field name ("gradients"), "dtype:float16" or "device:gpu"."""
        kind, _, value = requirement.partition(":")
        if kind == "dtype":
            return value in self.dtypes
        if kind == "device":
            return value in self.devices
        if kind == "size":
            return int(value) in self.sizes
        if kind not in {f.name for f in fields(self)}:
            raise KeyError(f"unknown capability requirement {requirement!r}")
        return bool(getattr(self, kind))

    def __post_init__(self):
        for dtype in self.dtypes:
            if dtype not in DTYPES:
                raise ValueError(f"Capabilities.dtypes: {dtype!r} is not one of {DTYPES}")
        for device in self.devices:
            if device not in DEVICES:
                raise ValueError(f"Capabilities.devices: {device!r} is not one of {DEVICES}")


@dataclass(frozen=True)
class AdapterConfig:
    """How the suite asks for an adapter instance."""

    n_embd: int = N_EMBD_SMALL
    dtype: str = "float32"
    device: str = "cpu"


class Adapter(abc.ABC):
    """One GPT-2 token + position embedding with its tied output head.

    Arrays in and out are numpy. ids are int32 or int64 [B, T]. Outputs of a float16 adapter
    are float16 arrays; a bfloat16 adapter returns float32 arrays holding bfloat16 values
    (numpy has no bfloat16; the upcast is exact).
    """

    #: class-level claims, readable before an instance is built
    capabilities: Capabilities = Capabilities()

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        self.config = config

    def framework_dtype(self, dtypes: dict):
        """dtypes[config.dtype], after checking that the dtype is one of `dtypes` and the device
        is claimed and available here: one clear error for a config the adapter cannot serve."""
        name, dtype, device = type(self).__name__, self.config.dtype, self.config.device
        if dtype not in dtypes:
            raise ValueError(f"{name}: dtype {dtype!r} is not one of {tuple(dtypes)}")
        if device not in self.capabilities.devices:
            raise ValueError(f"{name}: device {device!r} is not one of {self.capabilities.devices}")
        available, why = self.device_available(device)
        if not available:
            raise ValueError(f"{name}: device {device!r} is not available: {why}")
        return dtypes[dtype]

    # -- environment --------------------------------------------------------------
    @classmethod
    def device_available(cls, device: str) -> tuple[bool, str]:
        """Whether this machine can run `device` now, and if not, why (shown in the skip)."""
        return (device == "cpu", "" if device == "cpu" else f"{cls.__name__} has no {device} probe")

    # -- tables -------------------------------------------------------------------
    @abc.abstractmethod
    def load_tables(self, wte: np.ndarray, wpe: np.ndarray) -> None:
        """Set the parameters from float32 tables [V, d] and [C, d], rounding to the
        adapter's dtype. Must copy: the suite reuses its arrays."""

    @abc.abstractmethod
    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """The current (wte, wpe) as numpy arrays (a copy)."""

    def init_tables(self, seed: int) -> None:
        """Initialise the tables with the implementation's own initialiser, seeded."""
        raise NotImplementedError("init_tables is not claimed")

    def assign_wte_row(self, index: int, values: np.ndarray) -> None:
        """Overwrite wte[index] in place, as an optimizer step would."""
        raise NotImplementedError("assign_wte_row is not claimed")

    @abc.abstractmethod
    def parameters(self) -> dict[str, tuple[int, ...]]:
        """Name -> shape of every distinct trainable parameter of the embedding and the
        output head (a tied head is the same parameter as wte and is listed once)."""

    # -- forward ------------------------------------------------------------------
    @abc.abstractmethod
    def embed(self, ids: np.ndarray, past_length: int = 0) -> np.ndarray:
        """h[b, t] = wte[ids[b, t]] + wpe[past_length + t], in inference mode."""

    def logits(self, h_final: np.ndarray) -> np.ndarray:
        """h_final [B, T, d] @ wte^T -> [B, T, V] through the tied table."""
        raise NotImplementedError("logits is not claimed")

    def gradients(
        self, ids: np.ndarray, past_length: int, cotangent_h: np.ndarray, cotangent_logits: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(dL/dwte, dL/dwpe) for L = sum(cotangent_h * h) + sum(cotangent_logits * logits(h)),
        h = embed(ids, past_length), through the implementation's autodiff."""
        raise NotImplementedError("gradients is not claimed")


def capabilities_of(factory) -> Capabilities:
    """Claims of an adapter class or factory, without building an instance when possible."""
    caps = getattr(factory, "capabilities", None)
    if isinstance(caps, Capabilities):
        return caps
    if not callable(factory):
        raise TypeError(f"{factory!r} ({type(factory).__name__}) is not an adapter class or factory function")
    name = getattr(factory, "__qualname__", None) or repr(factory)
    raise TypeError(
        f"{name} has no `capabilities` attribute of type Capabilities; "
        "set it on the adapter class or on the factory function"
    )


__all__ = ["Adapter", "AdapterConfig", "Capabilities", "DTYPES", "DEVICES", "capabilities_of"]
