"""GPT-2's embedding and tied head in PyTorch with raw nn.Parameter tables, as a port of
openai/gpt-2's model.py reads: `wte[X] + wpe[positions]` by tensor indexing, the head
`h @ wte.T`. Tensor indexing wraps negative ids to the end of the table, so the range check is
the implementation's own, before the gather."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities

VOCAB, CONTEXT = 50257, 1024


class Embedding(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(VOCAB, n_embd) * 0.02)
        self.wpe = nn.Parameter(torch.randn(CONTEXT, n_embd) * 0.01)

    def forward(self, x: torch.Tensor, past_length: int = 0) -> torch.Tensor:
        if x.ndim != 2:
            raise ValueError(f"token ids must be [B, T], got shape {tuple(x.shape)}")
        if x.is_floating_point() or x.dtype == torch.bool:
            raise TypeError(f"token ids must be integers, got {x.dtype}")
        if not isinstance(past_length, int) or past_length < 0:
            raise ValueError(f"past_length must be a non-negative int, got {past_length!r}")
        positions = torch.arange(past_length, past_length + x.shape[1])
        if x.shape[1] and positions[-1] >= CONTEXT:
            raise IndexError(f"position {int(positions[-1])} is out of range for n_ctx={CONTEXT}")
        bad = (x < 0) | (x >= VOCAB)
        if bad.any():
            raise IndexError(f"token id {int(x[bad][0])} is out of range for n_vocab={VOCAB}")
        return self.wte[x] + self.wpe[positions]

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.wte.T


class Adapter(Adapter):
    capabilities = Capabilities(gradients=True)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.model = Embedding(config.n_embd)

    def load_tables(self, wte, wpe):
        with torch.no_grad():
            self.model.wte.copy_(torch.as_tensor(np.ascontiguousarray(wte)))
            self.model.wpe.copy_(torch.as_tensor(np.ascontiguousarray(wpe)))

    def tables(self):
        return self.model.wte.detach().clone().numpy(), self.model.wpe.detach().clone().numpy()

    def init_tables(self, seed):
        torch.manual_seed(seed)
        self.model = Embedding(self.config.n_embd)

    def assign_wte_row(self, index, values):
        with torch.no_grad():
            self.model.wte[index] = torch.as_tensor(values)

    def parameters(self):
        return {name: tuple(p.shape) for name, p in self.model.named_parameters()}

    def embed(self, ids, past_length=0):
        if isinstance(past_length, np.integer | np.ndarray):
            past_length = past_length.item()
        with torch.no_grad():
            return self.model(torch.tensor(ids.copy()), past_length).numpy()

    def logits(self, h_final):
        with torch.no_grad():
            return self.model.logits(torch.tensor(h_final.copy())).numpy()

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        if isinstance(past_length, np.integer | np.ndarray):
            past_length = past_length.item()
        self.model.zero_grad()
        h = self.model(torch.tensor(ids.copy()), past_length)
        g_h, g_logits = torch.tensor(cotangent_h.copy()), torch.tensor(cotangent_logits.copy())
        loss = (h * g_h).sum() + (self.model.logits(h) * g_logits).sum()
        loss.backward()
        return self.model.wte.grad.numpy().copy(), self.model.wpe.grad.numpy().copy()
