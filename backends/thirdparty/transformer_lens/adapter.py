"""Adapter for TransformerLens' HookedTransformer (PyTorch), the implementation under test -- not
a reimplementation. Built from an explicit HookedTransformerConfig with GPT-2's shape (the
fields TransformerLens' own GPT2LMHeadModel conversion sets, loading_from_pretrained.py
L498-513), one block, random init; never from_pretrained (no hub, no tokenizer).

HookedTransformer was removed in TransformerLens 4.0 (replaced by TransformerBridge, which wraps
a Hugging Face model), so this needs transformer-lens 3.x; it was checked with 3.9.0.

What is observed, and how (Capabilities.black_box):

- h: the residual stream entering block 0 (what `blocks.0.hook_resid_pre` sees), in eval mode:
  `HookedTransformer.forward(tokens, stop_at_layer=0, ...)`, which runs the model's own
  input_to_embed -- hook_embed(embed(tokens)) + hook_pos_embed(pos_embed(tokens, offset, mask))
  (HookedTransformer.py L460 and L350-353) -- and returns the residual before any block
  (L672-674). FULL_FORWARD = True instead runs every block through run_with_cache and reads
  `blocks.0.hook_resid_pre` (tests/backends/test_transformer_lens.py checks that both give
  the same bits).
- the cache offset: a real TransformerLensKeyValueCache (cache/key_value_cache.py) as after a
  prefill of past_length tokens: each layer's entry holds past_length (zero) keys/values and
  previous_attention_mask holds past_length ones. HookedTransformer.get_pos_offset reads the
  offset from the cached keys' length (L307-330); with a cache the positions come from the
  cumulative attention mask (utilities/tensors.py get_offset_position_ids) and W_pos is
  indexed with them (components/pos_embed.py L58-59). With no tokenizer the model cannot derive
  the new tokens' attention mask itself (HookedTransformer.py L436-437), so, as the forward's
  docstring asks of callers, the adapter passes all ones (no padding). past_length = 0 runs
  without a cache (the plain slice W_pos[0:T], pos_embed.py L47-52). The cached keys/values
  are a stride-0 view of one zero, so a cache of any length costs no memory.
- logits: `model.unembed(h)`: TransformerLens' Unembed, its own W_U [d, V] and b_U [V]
  (components/unembed.py). It is not tied to embed.W_E: HookedTransformer has no tying (its
  config's tie_word_embeddings is "only used in EncoderDecoder (T5)"), so load_tables sets
  W_E and W_pos only and the head keeps its own (seeded, random) W_U.
- init: `torch.manual_seed(seed)` then `HookedTransformer(cfg)` with the default
  init_weights=True: the model's own init_weights -> _init_weights_gpt2 (L1523-1570), exactly
  what cfg.seed = seed would do (init_weights seeds torch with it), without cfg.seed's
  side effect of also seeding Python's and numpy's global generators.
- parameters(): named_parameters() of embed, pos_embed and unembed.

The adapter adds no checks of its own: ids go to the model as torch tensors unchanged, so
whatever TransformerLens / torch do with negative or too-large ids, too-long sequences, float
ids or other ranks is what the suite sees. past_length has no counterpart in the API (the
offset is the length of the cache), so it becomes the length of the cached tensors, given to
torch as a tensor size: torch rejects negative and fractional sizes but reads True as 1.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig
from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig, Capabilities
from gpt2_conformance.backends.thirdparty.torch_blackbox import TORCH_DTYPES, TorchBlackBoxAdapter, from_numpy

_N_HEAD = {768: 12, 1024: 16, 1280: 20, 1600: 25}  # GPT-2's released head counts
_CONSTRUCTION_SEED = 0  # the head's W_U (not set by load_tables) is the same in every adapter


def tl_config(n_embd: int, dtype: torch.dtype = torch.float32) -> HookedTransformerConfig:
    """GPT-2 at width n_embd, as TransformerLens' own GPT2LMHeadModel conversion fills it
    (loading_from_pretrained.py L498-513: initializer_range is not set, so it defaults), one
    block (the embedding does not depend on the blocks)."""
    n_head = _N_HEAD.get(n_embd, 1)
    return HookedTransformerConfig(
        d_model=n_embd,
        d_head=n_embd // n_head,
        n_heads=n_head,
        d_mlp=4 * n_embd,
        n_layers=1,
        n_ctx=gpt2.N_CTX,
        eps=1e-5,
        d_vocab=gpt2.N_VOCAB,
        act_fn="gelu_new",
        use_attn_scale=True,
        use_local_attn=False,
        scale_attn_by_inverse_layer_idx=False,
        normalization_type="LN",
        original_architecture="GPT2LMHeadModel",
        device="cpu",
        dtype=dtype,
    )


def _build(cfg: HookedTransformerConfig) -> HookedTransformer:
    with warnings.catch_warnings():
        # 3.x warns that HookedTransformer is deprecated (removed in 4.0)
        warnings.filterwarnings("ignore", category=DeprecationWarning, message="HookedTransformer is deprecated")
        return HookedTransformer(cfg)


class TransformerLensAdapter(TorchBlackBoxAdapter):
    capabilities = Capabilities(
        dtypes=tuple(TORCH_DTYPES),
        devices=("cpu",),
        gradients=True,
        black_box="h = the residual stream entering block 0 (blocks.0.hook_resid_pre), via "
        "HookedTransformer.forward(stop_at_layer=0); offset from a "
        "TransformerLensKeyValueCache holding past_length entries; logits = unembed(h)",
    )
    FULL_FORWARD = False  # True: run every block (run_with_cache) and read blocks.0.hook_resid_pre
    PARAMETER_PREFIXES = ("embed.", "pos_embed.", "unembed.")

    @classmethod
    def implementation(cls) -> str:
        from importlib.metadata import version

        return f"transformer-lens {version('transformer-lens')} HookedTransformer (torch {torch.__version__})"

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.dtype = self.framework_dtype(TORCH_DTYPES)
        self.tl_config = tl_config(config.n_embd, self.dtype)
        # the tables are set by load_tables or init_tables, which always come next; the head's
        # W_U is not (it is not tied), so build with a fixed seed to keep it reproducible
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_CONSTRUCTION_SEED)
            self.model = _build(self.tl_config).eval()

    # -- tables -------------------------------------------------------------------
    def _table_parameters(self):
        return self.model.embed.W_E, self.model.pos_embed.W_pos

    def init_tables(self, seed):
        torch.manual_seed(seed)
        self.model = _build(self.tl_config).eval()  # init_weights -> _init_weights_gpt2

    # -- forward ------------------------------------------------------------------
    def _head(self, h):
        return self.model.unembed(h)

    def _cache(self, batch: int, past_length) -> TransformerLensKeyValueCache:
        """A real TransformerLensKeyValueCache as after a prefill of past_length tokens: every
        layer holds past_length (zero) keys/values, the attention mask so far is all ones."""
        cfg = self.tl_config
        cache = TransformerLensKeyValueCache.init_cache(cfg, cfg.device, batch)
        shape = (batch, past_length, cfg.n_heads, cfg.d_head)
        kv = torch.zeros((), dtype=self.dtype).as_strided(shape, (0, 0, 0, 0))
        for entry in cache.entries:
            entry.past_keys, entry.past_values = kv, kv
        cache.previous_attention_mask = torch.ones((batch, past_length), dtype=torch.int)
        return cache

    def _h(self, ids, past_length) -> torch.Tensor:
        tokens = from_numpy(ids) if isinstance(ids, np.ndarray) else ids
        # without past_length, neither (None: the model's own defaults)
        past = self._cache(tokens.shape[0], past_length) if past_length else None
        # no tokenizer, so the caller gives the new tokens' mask: no padding
        mask = torch.ones(tokens.shape, dtype=torch.int) if past_length else None
        if self.FULL_FORWARD:
            _, cache = self.model.run_with_cache(
                tokens,
                return_type=None,
                names_filter="blocks.0.hook_resid_pre",
                past_kv_cache=past,
                attention_mask=mask,
            )
            return cache["blocks.0.hook_resid_pre"]
        return self.model(tokens, stop_at_layer=0, past_kv_cache=past, attention_mask=mask)
