"""The suite's tables: float32, drawn like GPT-2's init, the same in every run and process (the
suite's fixtures, the parity fingerprint and the bench all use these)."""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api import gpt2

TABLE_SEED = 20190214  # GPT-2's release date; any fixed seed works, fixed makes runs repeatable


def final_h(batch: int, seq_len: int, seed: int, n_embd: int = gpt2.N_EMBD_SMALL) -> np.ndarray:
    """A stand-in for the final LayerNorm's output, the head's input: unit-scale float32 values."""
    return np.random.default_rng(seed).standard_normal((batch, seq_len, n_embd), dtype=np.float32)


def random_tables(n_embd: int, seed: int = TABLE_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(wte, wpe) in float32, read-only (their values matter for rounding, not stats)."""
    rng = np.random.default_rng(seed)
    wte = rng.standard_normal((gpt2.N_VOCAB, n_embd), dtype=np.float32) * np.float32(gpt2.WTE_INIT_STD)
    wpe = rng.standard_normal((gpt2.N_CTX, n_embd), dtype=np.float32) * np.float32(gpt2.WPE_INIT_STD)
    wte.flags.writeable = wpe.flags.writeable = False  # tests copy before changing them
    return wte, wpe
