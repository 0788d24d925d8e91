"""Adapter for Hugging Face transformers' GPT2LMHeadModel (PyTorch), the implementation
under test -- not a reimplementation. Built from an explicit GPT2Config (no model hub).

What is observed, and how (Capabilities.black_box):

- h: the model's first hidden state, `GPT2Model.forward(...).hidden_states[0]` in eval mode,
  i.e. the input of block 0: wte(input_ids) + wpe(position_ids) after `self.drop` (identity in
  eval). By default the forward is stopped right there by a forward pre-hook on block 0 that
  records its input, which is exactly what transformers' own output capturing records as
  hidden_states[0] (utils/output_capturing.py) -- it saves running the blocks, which cannot
  change h. FULL_FORWARD = True runs the complete forward with output_hidden_states instead
  (tests/test_thirdparty.py checks that both give the same bits).
- the cache offset: a real transformers DynamicCache holding past_length cached key/value
  entries; GPT2Model derives the positions from `cache.get_seq_length()`
  (modeling_gpt2.py L571-574). The cached values are zeros (h does not depend on them); they
  are a stride-0 view, so a cache of any length costs no memory.
- logits: `lm_head(h)`, the tied nn.Linear (lm_head.weight is transformer.wte.weight after
  the model's own tie_weights()).
- init: `torch.manual_seed(seed)` then `GPT2LMHeadModel(config)`: the model's own post_init ->
  init_weights -> _init_weights.
- parameters(): named_parameters() of the embedding and the head (a tied head is listed
  once by torch, an untied one would show up as lm_head.weight).

The adapter adds no checks of its own: ids go to the model as torch tensors unchanged, so
whatever transformers / torch do with out-of-range ids, positions, float ids or other ranks is
what the suite sees. past_length has no counterpart in transformers' API (the offset is the
length of the cache), so it becomes the length of the cached key tensor, given to torch as a
tensor size: torch rejects negative and fractional sizes but reads True as 1.
"""

from __future__ import annotations

import numpy as np
import torch
import transformers
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel
from transformers import initialization as hf_init
from transformers.cache_utils import DynamicLayer

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig, Capabilities
from gpt2_conformance.backends.thirdparty.torch_blackbox import TORCH_DTYPES, TorchBlackBoxAdapter, from_numpy

_N_HEAD = {768: 12, 1024: 16, 1280: 20, 1600: 25}  # GPT-2's released head counts


class StopAtBlock0(Exception):
    """Raised by the block-0 pre-hook to end the forward once h is recorded."""


def gpt2_config(n_embd: int) -> GPT2Config:
    """GPT-2's hyperparameters at width n_embd; one block (the embedding does not care)."""
    return GPT2Config(
        vocab_size=gpt2.N_VOCAB,
        n_positions=gpt2.N_CTX,
        n_embd=n_embd,
        n_layer=1,
        n_head=_N_HEAD.get(n_embd, 1),
        tie_word_embeddings=True,
    )


class HFTransformersAdapter(TorchBlackBoxAdapter):
    capabilities = Capabilities(
        dtypes=tuple(TORCH_DTYPES),
        devices=("cpu",),
        gradients=True,
        black_box="h = GPT2Model hidden_states[0] (input of block 0, eval mode); offset from a "
        "DynamicCache holding past_length entries; logits = lm_head(h)",
    )
    FULL_FORWARD = False  # True: run every block and read output.hidden_states[0]
    PARAMETER_PREFIXES = ("transformer.wte.", "transformer.wpe.", "lm_head.")

    @classmethod
    def implementation(cls) -> str:
        return f"transformers {transformers.__version__} GPT2LMHeadModel (torch {torch.__version__})"

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        if config.dtype not in TORCH_DTYPES:
            raise ValueError(f"HFTransformersAdapter: dtype {config.dtype!r} is not one of {tuple(TORCH_DTYPES)}")
        if config.device != "cpu":
            raise ValueError(f"HFTransformersAdapter: device {config.device!r}: only cpu is claimed")
        self.dtype = TORCH_DTYPES[config.dtype]
        self.hf_config = gpt2_config(config.n_embd)
        # The tables are set by load_tables or init_tables, which always come next, so skip the
        # 39M-value random init here (transformers' own no_init_weights, as from_pretrained
        # does), then tie the head as the model itself does at the end of post_init.
        with hf_init.no_init_weights():
            model = GPT2LMHeadModel(self.hf_config)
        model.tie_weights()
        self._set_model(model)

    def _set_model(self, model: GPT2LMHeadModel) -> None:
        # transformers types .to through functools.wraps, whose _Wrapped loses the bound self
        self.model = model.to(self.dtype).eval()  # type: ignore[arg-type, unused-ignore]
        self._captured: torch.Tensor | None = None
        self.model.transformer.h[0].register_forward_pre_hook(self._record_h, with_kwargs=True)

    def _record_h(self, module, args, kwargs):
        h = args[0] if args else kwargs["hidden_states"]
        self._captured = h
        if not self.FULL_FORWARD:
            raise StopAtBlock0

    # -- tables -------------------------------------------------------------------
    def _table_parameters(self):
        return self.model.transformer.wte.weight, self.model.transformer.wpe.weight

    def init_tables(self, seed):
        torch.manual_seed(seed)
        self._set_model(GPT2LMHeadModel(self.hf_config))  # post_init -> _init_weights, tie_weights

    # -- forward ------------------------------------------------------------------
    def _head(self, h):
        return self.model.lm_head(h)

    def _cache(self, batch: int, past_length) -> DynamicCache:
        """A real DynamicCache whose one layer holds past_length (zero) key/value entries."""
        cfg = self.hf_config
        shape = (batch, cfg.n_head, past_length, cfg.n_embd // cfg.n_head)
        kv = torch.zeros((), dtype=self.dtype).as_strided(shape, (0, 0, 0, 0))
        cache = DynamicCache(config=cfg)
        layer = cache.layers[0]
        assert isinstance(layer, DynamicLayer)  # what DynamicCache makes for a model of full attention layers
        # DynamicLayer.update would copy the entries (torch.cat onto an empty tensor); set the
        # stride-0 tensors as the layer's state instead, as update's lazy initialisation does
        layer.lazy_initialization(kv, kv)
        layer.keys, layer.values = kv, kv
        return cache

    def _h(self, ids, past_length) -> torch.Tensor:
        input_ids = from_numpy(ids) if isinstance(ids, np.ndarray) else ids
        cache = self._cache(input_ids.shape[0], past_length) if past_length else None
        self._captured = None
        try:
            out = self.model.transformer(
                input_ids=input_ids, cache=cache, use_cache=cache is not None, output_hidden_states=self.FULL_FORWARD
            )
        except StopAtBlock0:
            return self._captured_h()
        if out.hidden_states is not None:
            return out.hidden_states[0]
        return self._captured_h()

    def _captured_h(self) -> torch.Tensor:
        assert self._captured is not None  # the pre-hook on block 0 records h before the block runs
        return self._captured
