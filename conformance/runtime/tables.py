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
    folder = machine.private_cache_folder("tables")
    names = [os.path.join(folder, f"{table}-{n_embd}-{seed}-numpy{np.__version__}.npy") for table in ("wte", "wpe")
             ] if folder else []
    tables = _read(names, n_embd, seed) if names else None
    if tables is None:
        tables = _draw(n_embd, seed)
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


def _read(names: list[str], n_embd: int, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        wte, wpe = (np.load(name, mmap_mode="r").view(np.ndarray) for name in names)
    except (OSError, ValueError):
        return None
    if (wte.shape, wpe.shape) != ((gpt2.N_VOCAB, n_embd), (gpt2.N_CTX, n_embd)) or \
            wte.dtype != np.float32 or wpe.dtype != np.float32:
        return None
    if not np.array_equal(wte.reshape(-1)[:CHECKED_VALUES], _first_values(seed)):
        return None
    return wte, wpe


def _write(names: list[str], tables: tuple[np.ndarray, np.ndarray]) -> None:
    """Each file whole or not at all (machine.replace_atomically); a refused one (a full disk) is
    drawn again by the next process."""
    for name, table in zip(names, tables):
        if not machine.replace_atomically(name, lambda f, table=table: np.save(f, table)):
            return
