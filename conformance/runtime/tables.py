"""The suite's tables: float32, drawn like GPT-2's init, the same in every run and process (the
suite's fixtures, the parity fingerprint and the bench all use these).

Drawing wte at d = 768 (38.6 million normals) takes about half a second, and every suite child
(each shard, each mutant of the project's kill matrix) needs the same tables, some of them twice
(the fixtures, then the parity fingerprint). So they are drawn once per process, and kept on disk
for the next process: a private, user-owned folder under the temp directory
(machine.private_cache_folder), one .npy per table, written to a temporary name and renamed into
place, read back memory-mapped and read-only. A file is used only if its shape and dtype are
right and its first values are the ones the seed draws; anything else is drawn again."""

from __future__ import annotations

import functools
import hashlib
import os

import numpy as np

from gpt2_conformance.api import gpt2, machine

TABLE_SEED = 20190214  # GPT-2's release date; any fixed seed works, fixed makes runs repeatable
CHECKED_VALUES = 4096  # of wte, drawn again to check a file on disk (a few microseconds)


def final_h(batch: int, seq_len: int, seed: int, n_embd: int = gpt2.N_EMBD_SMALL) -> np.ndarray:
    """A stand-in for the final LayerNorm's output, the head's input: unit-scale float32 values."""
    return np.random.default_rng(seed).standard_normal((batch, seq_len, n_embd), dtype=np.float32)


@functools.lru_cache(maxsize=2)
def random_tables(n_embd: int, seed: int = TABLE_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(wte, wpe) in float32, read-only (their values matter for rounding, not stats); the same
    arrays on every call in a process."""
    return _kept_on_disk(f"{n_embd}-{seed}", n_embd, _first_values(seed), lambda: _draw(n_embd, seed))


@functools.lru_cache(maxsize=2)
def rounded_tables(n_embd: int, dtype: str, seed: int = TABLE_SEED) -> tuple[np.ndarray, np.ndarray]:
    """random_tables rounded to nearest-even in `dtype`, as float32, read-only and kept on disk
    like them: a DTYPE clause's tests in every process read the same rounding of 154 MB instead
    of making their own (memory a process has not touched costs more than the rounding)."""
    from gpt2_conformance.runtime.numerics import round_to_dtype

    first = round_to_dtype(_first_values(seed), dtype)
    return _kept_on_disk(
        f"{n_embd}-{seed}-{dtype}",
        n_embd,
        first,
        lambda: tuple(round_to_dtype(t, dtype) for t in random_tables(n_embd, seed)),
    )


def golden_standin_wte(golden, fill: np.ndarray) -> np.ndarray:
    """golden/data.standin_wte(golden, fill) for the suite's own wte as `fill`, kept on disk like
    the tables (named by a digest of the known values written into it); any other fill is made
    in memory."""
    from gpt2_conformance.golden.data import standin_wte

    n_embd = fill.shape[1]
    if fill is not random_tables(n_embd)[0]:
        return standin_wte(golden, fill)
    known = sorted((k.row, k.col, np.float32(k.value).view(np.uint32).item()) for k in golden.wte_known)
    digest = hashlib.sha256(repr(known).encode()).hexdigest()[:16]
    first = _first_values(TABLE_SEED)
    for row, col, bits in known:
        if row * n_embd + col < CHECKED_VALUES:
            first[row * n_embd + col] = np.uint32(bits).view(np.float32)
    wpe = random_tables(n_embd)[1]  # a stand-in file pair needs a wpe: the suite's (never read)
    return _kept_on_disk(
        f"{n_embd}-{TABLE_SEED}-golden-{digest}", n_embd, first, lambda: (standin_wte(golden, fill), np.array(wpe))
    )[0]


def _kept_on_disk(key: str, n_embd: int, first_values: np.ndarray, make) -> tuple[np.ndarray, np.ndarray]:
    """The tables `make()` returns, read back from this user's cache folder where a file for
    `key` holds them (its shape, dtype and first values checked), else made and written there."""
    folder = machine.private_cache_folder("tables")
    names = (
        [os.path.join(folder, f"{table}-{key}-numpy{np.__version__}.npy") for table in ("wte", "wpe")] if folder else []
    )
    tables = _read(names, n_embd, first_values) if names else None
    if tables is None:
        tables = make()
        if names:
            _write(names, tables)
    for table in tables:
        table.flags.writeable = False  # tests copy before changing them
    return tables


def _draw(n_embd: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    wte = rng.standard_normal((gpt2.N_VOCAB, n_embd), dtype=np.float32) * np.float32(gpt2.WTE_INIT_STD)
    wpe = rng.standard_normal((gpt2.N_CTX, n_embd), dtype=np.float32) * np.float32(gpt2.WPE_INIT_STD)
    return wte, wpe


def _first_values(seed: int) -> np.ndarray:
    """wte's first values as _draw makes them: the generator fills its output in order."""
    draw = np.random.default_rng(seed).standard_normal(CHECKED_VALUES, dtype=np.float32)
    return draw * np.float32(gpt2.WTE_INIT_STD)


def _read(names: list[str], n_embd: int, first_values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        wte, wpe = (np.load(name, mmap_mode="r").view(np.ndarray) for name in names)
    except (OSError, ValueError):
        return None
    if (
        (wte.shape, wpe.shape) != ((gpt2.N_VOCAB, n_embd), (gpt2.N_CTX, n_embd))
        or wte.dtype != np.float32
        or wpe.dtype != np.float32
    ):
        return None
    if not np.array_equal(wte.reshape(-1)[:CHECKED_VALUES], first_values):
        return None
    return wte, wpe


def _write(names: list[str], tables: tuple[np.ndarray, np.ndarray]) -> None:
    """Each file whole or not at all (machine.replace_atomically); a refused one (a full disk) is
    drawn again by the next process."""
    for name, table in zip(names, tables, strict=False):
        if not machine.replace_atomically(name, functools.partial(np.save, arr=table)):
            return
