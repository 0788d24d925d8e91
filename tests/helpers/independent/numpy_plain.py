"""GPT-2's embedding and tied head in plain numpy, as a reader of openai/gpt-2's model.py
would port it: two arrays, fancy indexing and a slice of wpe, the head `h @ wte.T`, and the
gradients worked out by hand (np.add.at scatters the gather's cotangent)."""

from __future__ import annotations

import operator

import numpy as np

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities

VOCAB, CONTEXT = 50257, 1024


class GPT2Embedding:
    def __init__(self, n_embd: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        # model.py: wpe ~ N(0, 0.01^2), wte ~ N(0, 0.02^2)
        self.wte = (rng.standard_normal((VOCAB, n_embd)) * 0.02).astype(np.float32)
        self.wpe = (rng.standard_normal((CONTEXT, n_embd)) * 0.01).astype(np.float32)

    def __call__(self, ids: np.ndarray, past_length: int = 0) -> np.ndarray:
        if ids.ndim != 2:
            raise ValueError(f"token ids must be [B, T], got shape {ids.shape}")
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"token ids must be integers, got {ids.dtype}")
        past_length = operator.index(past_length)  # an int, a numpy integer or a 0-d integer array
        if past_length < 0:
            raise ValueError(f"past_length must be >= 0, got {past_length}")
        if past_length + ids.shape[1] > CONTEXT:
            raise IndexError(f"positions up to {past_length + ids.shape[1] - 1} do not fit a context of {CONTEXT}")
        if ids.size and (ids.min() < 0 or ids.max() >= VOCAB):
            bad = ids[(ids < 0) | (ids >= VOCAB)][0]
            raise IndexError(f"token id {bad} is not in [0, {VOCAB})")
        return self.wte[ids] + self.wpe[past_length : past_length + ids.shape[1]]

    def head(self, h: np.ndarray) -> np.ndarray:
        return h @ self.wte.T


class Adapter(Adapter):
    capabilities = Capabilities(gradients=True)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.model = GPT2Embedding(config.n_embd)

    def load_tables(self, wte, wpe):
        self.model.wte, self.model.wpe = np.array(wte, np.float32), np.array(wpe, np.float32)

    def tables(self):
        return self.model.wte.copy(), self.model.wpe.copy()

    def init_tables(self, seed):
        self.model = GPT2Embedding(self.config.n_embd, seed)

    def assign_wte_row(self, index, values):
        self.model.wte[index] = values

    def parameters(self):
        return {"wte": self.model.wte.shape, "wpe": self.model.wpe.shape}

    def embed(self, ids, past_length=0):
        return self.model(ids, past_length)

    def logits(self, h_final):
        return self.model.head(h_final)

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        h = self.model(ids, past_length)
        grad_h = cotangent_h + cotangent_logits @ self.model.wte
        grad_wte = np.einsum("btv,btd->vd", cotangent_logits, h)
        np.add.at(grad_wte, ids, grad_h)
        grad_wpe = np.zeros_like(self.model.wpe)
        grad_wpe[past_length : past_length + ids.shape[1]] = grad_h.sum(axis=0)
        return grad_wte, grad_wpe
