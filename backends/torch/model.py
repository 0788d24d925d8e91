"""GPT-2's token + position embedding and tied output head, as a PyTorch user writes it.

h = wte(ids) + wpe(past_length + t) with two nn.Embedding tables, and logits = h @ wte^T
through the very same Parameter (F.linear, no bias, no second [V, d] table), as in
openai/gpt-2 model.py and Hugging Face's GPT2LMHeadModel.

Inputs are checked explicitly before the gather: torch's own behaviour on a bad index is
not an error a user can act on (nn.Embedding on CPU raises IndexError("index out of range
in self") without the value, tensor indexing wraps -1 to the last row, CUDA asserts on the
device and poisons the context, torch.compile changes the exception type).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.errors import TokenIdOutOfRangeError
from gpt2_conformance.api.validation import check_ids_layout, check_past_length, check_positions, describe_bad_id


def check_token_ids(ids: torch.Tensor, n_vocab: int) -> None:
    """Every id in [0, n_vocab): one aminmax reduction on the ids' own device and one host
    sync for its verdict; the ids are copied to the host only to describe an error."""
    if ids.numel() == 0:
        return
    lo, hi = torch.aminmax(ids)
    if bool((lo < 0) | (hi >= n_vocab)):
        bad = (ids < 0) | (ids >= n_vocab)
        raise TokenIdOutOfRangeError(describe_bad_id(ids.cpu().numpy(), bad.cpu().numpy(), n_vocab))


class GPT2Embedding(nn.Module):
    """wte [n_vocab, n_embd] and wpe [n_ctx, n_embd]; forward gives h, head gives logits."""

    def __init__(
        self,
        n_embd: int,
        n_vocab: int = gpt2.N_VOCAB,
        n_ctx: int = gpt2.N_CTX,
        *,
        device=None,
        dtype=None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.n_vocab, self.n_ctx = n_vocab, n_ctx
        self.wte = nn.Embedding(n_vocab, n_embd, device=device, dtype=dtype)
        self.wpe = nn.Embedding(n_ctx, n_embd, device=device, dtype=dtype)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        # model(): random_normal_initializer, plain normals (not nn.Embedding's N(0, 1),
        # not trunc_normal_)
        nn.init.normal_(self.wte.weight, 0.0, gpt2.WTE_INIT_STD, generator=generator)
        nn.init.normal_(self.wpe.weight, 0.0, gpt2.WPE_INIT_STD, generator=generator)

    def forward(self, ids: torch.Tensor, past_length: int = 0) -> torch.Tensor:
        """ids int32/int64 [B, T] -> h [B, T, n_embd]; token t sits at position past_length + t."""
        dtype_name = str(ids.dtype).removeprefix("torch.")
        is_integer = not (ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool)
        check_ids_layout(tuple(ids.shape), dtype_name, is_integer)
        past_length = check_past_length(past_length)
        seq_len = ids.shape[1]
        check_positions(seq_len, past_length, self.n_ctx)  # host-side: needs only T and past_length
        check_token_ids(ids, self.n_vocab)
        positions = torch.arange(past_length, past_length + seq_len, device=ids.device)
        # in place into the gather's fresh output: one [B, T, d] allocation instead of two
        # (faster eagerly at the bench's prefill shapes: `gpt2-conformance bench` times it). Autograd
        # allows it: embedding's backward needs the ids, not its output.
        h = self.wte(ids)
        h += self.wpe(positions)
        return h

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """logits = h @ wte^T through wte itself. Reduced precision accumulates in float32
        and rounds once to the table's dtype (in float32 both casts are no-ops, so the
        matmul reads the Parameter's own storage)."""
        weight = self.wte.weight
        return F.linear(h.to(torch.float32), weight.to(torch.float32)).to(weight.dtype)
