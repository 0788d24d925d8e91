"""GPT-2's token embedding, position embedding and tied output head, written by us with
tinygrad's own modules, the way tinygrad's example GPT-2 writes them (tinygrad's examples/gpt2.py; it is in
neither the tinygrad wheel nor its sdist, so no GPT-2 is packaged to wrap. The lines below were
read in a stored copy of tinygrad's repository at commit 01523dd29ec3, an older revision than the
v0.14.0 tag, whose file is https://github.com/tinygrad/tinygrad/blob/v0.14.0/examples/gpt2.py):

- `Transformer.__init__`: `self.wte = Embedding(vocab_size, dim)`, `self.wpe = Embedding(max_seq_len, dim)`
  and `self.lm_head = Linear(dim, vocab_size, bias=False)`, whose weight `GPT2.build` sets from
  `wte.weight` ("lm head and wte are tied");
- `Transformer.__call__`: `_bsz, seqlen = tokens.shape`,
  `pos = self.allpos.shrink(((0, self.allpos.shape[0]), (start_pos, start_pos + seqlen)))` over
  `allpos = Tensor.arange(0, MAX_CONTEXT).reshape(1, -1)`, then `embed`: `self.wte(tokens) + self.wpe(pos)`
  (MAX_CONTEXT is 128 in that copy; here it is GPT-2's n_ctx, 1024, the wpe table's rows);
- `logits = self.lm_head(...)`.

What is judged is therefore tinygrad's `nn.Embedding` (a one-hot compare against an arange,
`where`, and a sum: tinygrad/nn/__init__.py `_embedding_fwd`), its `shrink`, and the kernels its
scheduler and the CPU (clang) device generate for them. The transformer blocks and ln_f of the
example are left out: they come after h and cannot change it, and the head is applied to the h
the suite hands in. Here the head's weight IS wte's tensor (one parameter, as the suite's tied
head asks), where the example copies the loaded wte array into lm_head.weight.
"""

from __future__ import annotations

from types import SimpleNamespace

from tinygrad import Tensor, dtypes, nn
from tinygrad.dtype import DType
from tinygrad.nn.state import load_state_dict

from gpt2_conformance.api import gpt2


class GPT2Embedding:
    """wte, wpe and the tied lm_head of the Transformer in tinygrad's examples/gpt2.py, on one tinygrad device."""

    def __init__(self, dim: int, device: str, dtype: DType = dtypes.float32):
        self.device, self.dtype = device, dtype
        # nn.Embedding's own init (Tensor.glorot_uniform) on the default device; moved to ours
        self.wte = nn.Embedding(gpt2.N_VOCAB, dim)
        self.wpe = nn.Embedding(gpt2.N_CTX, dim)
        self.lm_head = nn.Linear(dim, gpt2.N_VOCAB, bias=False)
        self.set_tables(self.wte.weight, self.wpe.weight)
        # tinygrad's examples/gpt2.py: allpos = Tensor.arange(0, MAX_CONTEXT).reshape(1, -1)
        self.allpos = Tensor.arange(0, gpt2.N_CTX).reshape(1, -1).to(device).realize()

    def set_tables(self, wte: Tensor, wpe: Tensor) -> None:
        """nn.Embedding's tables replaced by these, before any load: the model's own init."""
        self.wte.weight = wte.to(self.device).cast(self.dtype).contiguous().realize()
        self.wpe.weight = wpe.to(self.device).cast(self.dtype).contiguous().realize()
        self.lm_head.weight = self.wte.weight  # tied: the same tensor, not a copy

    def load(self, wte: Tensor, wpe: Tensor) -> None:
        """Load the tables as the example's GPT2.build does: tinygrad's load_state_dict with
        lm_head.weight given wte's weights, which refuses a table of the wrong shape (ValueError
        'Shape mismatch in layer ...', tinygrad/nn/state.py L208-210) and replaces each tensor's data
        in place (so the head, wte's own tensor, keeps reading it)."""
        wte = wte.cast(self.dtype)
        tables = SimpleNamespace(wte=self.wte, wpe=self.wpe, lm_head=self.lm_head)  # not allpos
        load_state_dict(
            tables, {"wte.weight": wte, "wpe.weight": wpe.cast(self.dtype), "lm_head.weight": wte}, verbose=False
        )

    def embed(self, tokens: Tensor, start_pos: int) -> Tensor:
        """h = wte(tokens) + wpe(positions start_pos .. start_pos + seqlen), as the example's forward."""
        _bsz, seqlen = tokens.shape  # as the example's __call__: ids are [B, T]
        pos = self.allpos.shrink(((0, self.allpos.shape[0]), (start_pos, start_pos + seqlen)))
        return self.wte(tokens) + self.wpe(pos)

    def head(self, h: Tensor) -> Tensor:
        return self.lm_head(h)
