"""A GPT-2 embedding someone wrote themselves in plain PyTorch, and its adapter.

    PYTHONPATH=. gpt2-conformance run --adapter examples.plain_torch_module:Adapter   # repo root
    PYTHONPATH=examples gpt2-conformance run --adapter plain_torch_module:Adapter

The module is ordinary PyTorch code with no dependency on this suite; the adapter below it is
the only glue: numpy in, numpy out (conformance/api/adapter.py).
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from torch import nn

from gpt2_conformance.api import adapter as protocol


class GPT2Embedding(nn.Module):
    """wte + wpe with GPT-2's init, the offset for a KV cache, and the head tied to wte."""

    def __init__(self, n_embd: int = 768, n_vocab: int = 50257, n_ctx: int = 1024):
        super().__init__()
        self.wte = nn.Embedding(n_vocab, n_embd)
        self.wpe = nn.Embedding(n_ctx, n_embd)
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        nn.init.normal_(self.wte.weight, std=0.02, generator=generator)  # GPT-2: wte ~ N(0, 0.02^2)
        nn.init.normal_(self.wpe.weight, std=0.01, generator=generator)  # GPT-2: wpe ~ N(0, 0.01^2)

    def forward(self, idx: torch.Tensor, past_length: int = 0) -> torch.Tensor:
        n_vocab, n_ctx = self.wte.num_embeddings, self.wpe.num_embeddings
        if isinstance(past_length, bool) or not isinstance(past_length, numbers.Integral) or past_length < 0:
            raise ValueError(f"past_length must be an integer >= 0, got {past_length!r}")
        if idx.dim() != 2 or idx.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"idx must be an int32/int64 tensor [B, T], got {idx.dtype} {tuple(idx.shape)}")
        T = idx.shape[1]
        if T and past_length + T > n_ctx:
            raise IndexError(f"position {past_length + T - 1} is outside the wpe table of {n_ctx} positions")
        bad = (idx < 0) | (idx >= n_vocab)
        if bad.any():
            raise IndexError(f"token id {int(idx[bad][0])} is outside the wte table of {n_vocab} tokens")
        pos = torch.arange(past_length, past_length + T, device=idx.device)
        return self.wte(idx) + self.wpe(pos)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.wte.weight.T  # tied: the same Parameter, no bias


class Adapter(protocol.Adapter):
    capabilities = protocol.Capabilities(gradients=True)  # float32 on cpu; every other claim

    def __init__(self, config=protocol.AdapterConfig()):
        super().__init__(config)
        self.model = GPT2Embedding(config.n_embd).eval()

    def load_tables(self, wte, wpe):
        self.model.load_state_dict({"wte.weight": _tensor(wte), "wpe.weight": _tensor(wpe)})

    def tables(self):
        return self.model.wte.weight.detach().numpy().copy(), self.model.wpe.weight.detach().numpy().copy()

    def init_tables(self, seed):
        self.model.reset_parameters(torch.Generator().manual_seed(seed))

    @torch.no_grad()
    def assign_wte_row(self, index, values):
        self.model.wte.weight[index] = torch.tensor(np.asarray(values, np.float32))

    def parameters(self):
        return {name: tuple(p.shape) for name, p in self.model.named_parameters()}

    @staticmethod
    def _torch_inputs(ids, past_length):
        """ids as a tensor, and a 0-d integer array past_length as the numpy integer it holds (the
        model takes integers)."""
        if isinstance(past_length, np.ndarray) and past_length.ndim == 0:
            past_length = past_length[()]
        return _tensor(ids), past_length

    @torch.no_grad()
    def embed(self, ids, past_length=0):
        return self.model(*self._torch_inputs(ids, past_length)).numpy()

    @torch.no_grad()
    def logits(self, h_final):
        return self.model.head(_tensor(h_final)).numpy()

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        params = [self.model.wte.weight, self.model.wpe.weight]
        with torch.enable_grad():
            h = self.model(*self._torch_inputs(ids, past_length))
            grads = torch.autograd.grad(
                [h, self.model.head(h)],
                params,
                grad_outputs=[_tensor(cotangent_h), _tensor(cotangent_logits)],
            )
        return tuple(g.numpy() for g in grads)


def _tensor(array) -> torch.Tensor:
    """A tensor holding a copy of `array`, whatever its memory layout: torch cannot view numpy
    arrays with negative strides (a reversed view), and the copy is C-ordered."""
    return torch.from_numpy(np.array(array, order="C", copy=True))
