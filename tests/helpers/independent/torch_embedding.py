"""GPT-2's embedding and tied head as PyTorch's tutorials and nanoGPT write it: an nn.Module
with two nn.Embedding tables, an nn.Linear head without bias whose weight *is* wte's
(`self.lm_head.weight = self.wte.weight`), nn.init.normal_ for the official stds, autograd for
the gradients. Its own checks are nanoGPT's: the sequence must fit the context, and the ids
must be rows of the table (torch's CPU gather raises without naming the id)."""

from __future__ import annotations

import operator

import numpy as np
import torch
from torch import nn

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities

VOCAB, CONTEXT = 50257, 1024


class GPT2Embedding(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, n_embd)
        self.wpe = nn.Embedding(CONTEXT, n_embd)
        self.lm_head = nn.Linear(n_embd, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None):
        nn.init.normal_(self.wte.weight, mean=0.0, std=0.02, generator=generator)
        nn.init.normal_(self.wpe.weight, mean=0.0, std=0.01, generator=generator)

    def forward(self, idx: torch.Tensor, past_length: int = 0) -> torch.Tensor:
        if idx.dim() != 2:
            raise ValueError(f"idx must be (batch, sequence), got shape {tuple(idx.shape)}")
        t = idx.size(1)
        if past_length < 0 or past_length + t > CONTEXT:
            last = past_length + t - 1
            raise ValueError(f"Cannot forward positions {past_length}..{last}, block size is only {CONTEXT}")
        if t and (idx.min() < 0 or idx.max() >= VOCAB):
            raise IndexError(f"token ids must be in [0, {VOCAB}), got min {int(idx.min())} max {int(idx.max())}")
        pos = torch.arange(past_length, past_length + t, dtype=torch.long)
        return self.wte(idx) + self.wpe(pos)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head(h)


class Adapter(Adapter):
    capabilities = Capabilities(gradients=True)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.model = GPT2Embedding(config.n_embd).eval()

    def load_tables(self, wte, wpe):
        state = {
            "wte.weight": torch.from_numpy(np.ascontiguousarray(wte)),
            "wpe.weight": torch.from_numpy(np.ascontiguousarray(wpe)),
        }
        self.model.load_state_dict(state, strict=False)

    def tables(self):
        return self.model.wte.weight.detach().numpy().copy(), self.model.wpe.weight.detach().numpy().copy()

    def init_tables(self, seed):
        self.model.reset_parameters(torch.Generator().manual_seed(seed))

    def assign_wte_row(self, index, values):
        with torch.no_grad():
            self.model.wte.weight[index] = torch.from_numpy(values)

    def parameters(self):
        return {name: tuple(p.shape) for name, p in self.model.named_parameters()}

    def _ids(self, ids):
        return torch.from_numpy(ids.copy())  # torch takes no negative strides

    def embed(self, ids, past_length=0):
        with torch.no_grad():
            return self.model(self._ids(ids), operator.index(past_length)).numpy()

    def logits(self, h_final):
        with torch.no_grad():
            return self.model.head(torch.from_numpy(h_final.copy())).numpy()

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        self.model.zero_grad()
        h = self.model(self._ids(ids), operator.index(past_length))
        g_h, g_logits = torch.from_numpy(cotangent_h.copy()), torch.from_numpy(cotangent_logits.copy())
        loss = (h * g_h).sum() + (self.model.head(h) * g_logits).sum()
        loss.backward()
        return self.model.wte.weight.grad.numpy().copy(), self.model.wpe.weight.grad.numpy().copy()
