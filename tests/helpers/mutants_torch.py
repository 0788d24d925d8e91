"""The PyTorch mutant catalogue: TorchAdapter with torch's raw ops used the wrong way, one
mistake per mutant (the model class holds the wrong code; the adapter plugs it in through
TorchAdapter.model_class). tests/test_kill_matrix.py runs the whole suite on each and checks
which clauses kill it (FRAMEWORK_KILLS["torch"], with the reason for each clause).

Imports torch at the top: import this module only where torch is installed.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from gpt2_conformance.api.validation import check_ids_layout, check_past_length, check_tables
from gpt2_conformance.backends.torch.adapter import TorchAdapter, from_numpy
from gpt2_conformance.backends.torch.model import GPT2Embedding


def _raw_input_checks(ids, past_length):
    """The layout and past_length checks only: the mutants below drop just the bounds."""
    check_ids_layout(
        tuple(ids.shape),
        str(ids.dtype).removeprefix("torch."),
        not (ids.dtype.is_floating_point or ids.dtype == torch.bool),
    )
    return check_past_length(past_length)


# -- the models: the wrong code -----------------------------------------------------------


class _EmbeddingNoBoundsCheckModel(GPT2Embedding):
    """nn.Embedding trusted to reject bad indices: on CPU it does raise, but
    IndexError("index out of range in self") names neither the value nor the table size."""

    def forward(self, ids, past_length=0):
        past_length = _raw_input_checks(ids, past_length)
        positions = torch.arange(past_length, past_length + ids.shape[1], device=ids.device)
        return self.wte(ids) + self.wpe(positions)


class _TensorIndexingNoBoundsCheckModel(GPT2Embedding):
    """weight[ids] and a wpe slice: indexing wraps negative ids (-1 reads row 50256) and a
    slice past the table end silently comes back short."""

    def forward(self, ids, past_length=0):
        past_length = _raw_input_checks(ids, past_length)
        return self.wte.weight[ids] + self.wpe.weight[past_length : past_length + ids.shape[1]]


class _UntiedHeadModel(GPT2Embedding):
    """An nn.Linear head whose weight is a copy of wte: a second [V, d] parameter."""

    def __init__(self, n_embd, *, device=None, dtype=None):  # skip_init needs `device` spelled out
        super().__init__(n_embd, device=device, dtype=dtype)
        self.lm_head = nn.Linear(
            n_embd, self.n_vocab, bias=False, device=self.wte.weight.device, dtype=self.wte.weight.dtype
        )

    def head(self, h):
        weight = self.lm_head.weight
        return F.linear(h.to(torch.float32), weight.to(torch.float32)).to(weight.dtype)


class _ScaleGradByFreqModel(GPT2Embedding):
    """nn.Embedding(scale_grad_by_freq=True): a token's gradient is divided by how often it
    occurs in the batch, so a repeated token's rows get too little."""

    def __init__(self, n_embd, *, device=None, dtype=None):  # skip_init needs `device` spelled out
        super().__init__(n_embd, device=device, dtype=dtype)
        self.wte.scale_grad_by_freq = True


# -- the mutants: TorchAdapter on each model -------------------------------------------------


class EmbeddingNoBoundsCheck(TorchAdapter):
    """No bounds checks of its own: nn.Embedding's IndexError is the only one (see the model)."""

    model_class = _EmbeddingNoBoundsCheckModel


class IndexingNoBoundsCheck(TorchAdapter):
    """No bounds checks, tensor indexing and a slice for the gathers (see the model)."""

    model_class = _TensorIndexingNoBoundsCheckModel


class UntiedHeadCopy(TorchAdapter):
    """An untied lm_head filled from the same wte array at load time (see the model)."""

    model_class = _UntiedHeadModel

    def load_tables(self, wte, wpe):
        """As a checkpoint converter that fills lm_head.weight from the same wte array would (after the
        reference's refusals of malformed tables: the defect is the copy)."""
        check_tables(wte, wpe, self.config.n_embd)
        self.model.load_state_dict(
            {"wte.weight": from_numpy(wte), "wpe.weight": from_numpy(wpe), "lm_head.weight": from_numpy(wte)}
        )


class ScaleGradByFreq(TorchAdapter):
    """wte built with scale_grad_by_freq=True (see the model)."""

    model_class = _ScaleGradByFreqModel


ALL = [
    obj
    for name, obj in sorted(globals().items())
    if isinstance(obj, type) and issubclass(obj, TorchAdapter) and obj is not TorchAdapter and not name.startswith("_")
]
