"""The torch glue shared by the adapters around black-box torch models, where h is read out of
the model's own forward rather than from a standalone embedding: backends/thirdparty/hf_transformers
(transformers' GPT2LMHeadModel) and backends/thirdparty/transformer_lens (TransformerLens'
HookedTransformer) subclass TorchBlackBoxAdapter here.

The base class owns the numpy <-> torch bridge and every Adapter method that is the same for
both: the tables, parameters(), embed, logits and gradients. A subclass builds `self.model`,
sets `self.dtype` (a torch dtype) and gives what is specific to its library: the wte and wpe
parameters, the head, the names of the embedding's and head's parameters, and `_h(ids,
past_length)`, the model's own h as a torch tensor (with autograd when grad is enabled).

Only these torch-based adapters import this module, so torch is imported at the top; the
suite (conformance/) never imports it.
"""

from __future__ import annotations

import abc

import numpy as np
import torch

from gpt2_conformance.api.adapter import Adapter
from gpt2_conformance.api.validation import check_tables
from gpt2_conformance.backends.torch.adapter import from_numpy  # the same numpy -> torch bridge as ours

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)  # numpy has no bfloat16; the upcast is exact
    return t.to("cpu").numpy().copy()


class TorchBlackBoxAdapter(Adapter):
    """An Adapter around a torch model whose h is the model's own (see the module docstring)."""

    #: prefixes of the named_parameters() that belong to the embedding and the output head
    PARAMETER_PREFIXES: tuple[str, ...] = ()

    @abc.abstractmethod
    def _table_parameters(self) -> tuple[torch.nn.Parameter, torch.nn.Parameter]:
        """The model's (wte, wpe) parameters themselves (not copies)."""

    @abc.abstractmethod
    def _head(self, h: torch.Tensor) -> torch.Tensor:
        """The model's own output head applied to h."""

    @abc.abstractmethod
    def _h(self, ids, past_length) -> torch.Tensor:
        """h for ids (numpy or torch) after past_length cached positions, from the model's forward."""

    # -- tables -------------------------------------------------------------------
    @torch.no_grad()
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        wte_param, wpe_param = self._table_parameters()
        wte_param.copy_(from_numpy(wte))
        wpe_param.copy_(from_numpy(wpe))

    def tables(self):
        wte_param, wpe_param = self._table_parameters()
        return to_numpy(wte_param), to_numpy(wpe_param)

    @torch.no_grad()
    def assign_wte_row(self, index, values):
        self._table_parameters()[0][index] = from_numpy(np.asarray(values, np.float32))

    def parameters(self):
        keep = self.PARAMETER_PREFIXES
        return {n: tuple(p.shape) for n, p in self.model.named_parameters() if n.startswith(keep)}

    # -- forward ------------------------------------------------------------------
    @torch.no_grad()
    def embed(self, ids, past_length=0):
        return to_numpy(self._h(ids, past_length))

    @torch.no_grad()
    def logits(self, h_final):
        # a bfloat16 adapter gets float32 arrays holding bfloat16 values (numpy has no
        # bfloat16): hand the head the model's dtype, as the model's own h would be
        h = from_numpy(np.ascontiguousarray(h_final)).to(self.dtype)
        return to_numpy(self._head(h))

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        params = list(self._table_parameters())
        cot_h = from_numpy(np.ascontiguousarray(cotangent_h)).to(self.dtype)
        cot_l = from_numpy(np.ascontiguousarray(cotangent_logits)).to(self.dtype)
        with torch.enable_grad():
            h = self._h(ids, past_length)
            logits = self._head(h)
            d_wte, d_wpe = torch.autograd.grad([h, logits], params, grad_outputs=[cot_h, cot_l])
        return tuple(d.detach().to(torch.float32).numpy() for d in (d_wte, d_wpe))
