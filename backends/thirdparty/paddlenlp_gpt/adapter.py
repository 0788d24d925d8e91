"""Adapter for PaddleNLP's GPT: `paddlenlp.transformers.gpt.modeling.GPTForCausalLM`, built from a
`GPTConfig` with GPT-2's sizes (50257 x d tokens, 1024 positions, d / 64 heads) and one decoder
layer (the layers are not what is judged, and one keeps the build small), in eval mode (dropout
off), on PaddlePaddle's CPU kernels. What is judged is PaddleNLP's GPTEmbeddings, GPTModel's
positions-from-the-cache, its tied GPTLMHead and PaddlePaddle's `nn.Embedding` / matmul / autograd.

What is observed, and how (Capabilities.black_box):

- h: the output of `model.gpt.embeddings` (word + position embeddings, dropout off), caught by a
  forward post-hook that stores it and stops the forward there, so that the decoder never runs.
  It is what GPTModel.forward hands its decoder and returns as hidden_states[0]
  (paddlenlp/transformers/gpt/modeling.py L1269-1275 at 2.8.1).
- the cache offset: a real cache, `past_key_values` of one (key, value) pair of zeros shaped
  [batch, past_length, heads, head_dim], the layout GPTModel reads its past_length from
  (modeling.py L1229-1233: positions arange(past_length, past_length + seq)). past_length 0 is no
  cache (None), as a first call passes. The adapter does not check past_length: it is the cache's
  length, and what paddle does with a bad one is what the suite sees.
- logits: the model's own `lm_head(h)` (GPTLMHead: a matmul with transpose_y against the tied
  word-embedding weight, modeling.py L1420-1451; tied at L1471).
- tables: `set_value` on the two embedding weights (lm_head's weight is the same parameter).
- init: `paddle.seed(seed)`, then the model built again with its own initialiser
  (GPTPretrainedModel._init_weights, modeling.py L967-1000: normal(0, initializer_range) for
  every nn.Embedding, wpe too; initializer_range 0.02 as GPT-2's config).
- gradients: paddle's autograd through the same embeddings and head.
- parameters(): those of gpt.embeddings and lm_head, by name, the tied weight listed once.

The adapter adds no checks of its own on ids: they go to paddle as a tensor of the numpy array's own
dtype and shape (paddle.to_tensor), so what PaddleNLP and paddle do with out-of-range ids, float
ids or other ranks is what the suite sees (id -1 reads memory before the table: waivers.toml and
upstream/). Claimed: float32 on CPU only.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables

if TYPE_CHECKING:
    from paddlenlp.transformers.gpt.configuration import GPTConfig
    from paddlenlp.transformers.gpt.modeling import GPTForCausalLM

# paddle is imported when the first adapter is built, not with this module: the class and its
# capabilities are also read where paddle is not installed (the suite's parent process, which runs
# this backend's children in its own environment, and scripts/regenerate.py's README row)
paddle: Any = None


def _import_paddle() -> None:
    global paddle
    if paddle is None:
        import paddle as module

        module.set_device("cpu")
        paddle = module


HEAD_DIM = 64  # GPT-2's: n_embd / n_head at every size


class _Stop(Exception):
    """Raised by the embeddings' post-hook once h is caught: the decoder is not run."""


def config_for(n_embd: int) -> GPTConfig:
    from paddlenlp.transformers.gpt.configuration import GPTConfig

    return GPTConfig(
        vocab_size=gpt2.N_VOCAB,
        hidden_size=n_embd,
        num_hidden_layers=1,
        num_attention_heads=n_embd // HEAD_DIM,
        intermediate_size=4 * n_embd,
        max_position_embeddings=gpt2.N_CTX,
        seq_length=gpt2.N_CTX,
        initializer_range=0.02,
        tie_word_embeddings=True,
    )


def _length(past_length):
    """A numpy integer as the Python int a cache shape takes; anything else goes to paddle as it is."""
    if isinstance(past_length, np.integer | np.ndarray) and np.ndim(past_length) == 0:
        if np.issubdtype(np.asarray(past_length).dtype, np.integer):
            return int(past_length)
    return past_length


class PaddleNLPGPTAdapter(Adapter):
    capabilities = Capabilities(
        dtypes=("float32",),
        devices=("cpu",),
        gradients=True,
        black_box="PaddleNLP GPTForCausalLM (1 layer): h = gpt.embeddings' output (a post-hook stops the forward); "
        "offset = a zero cache of past_length entries; logits = the model's tied lm_head(h)",
    )

    @classmethod
    def implementation(cls) -> str:
        return f"paddlenlp {version('paddlenlp')} GPTForCausalLM on paddlepaddle {version('paddlepaddle')} (CPU)"

    @classmethod
    def device_available(cls, device: str) -> tuple[bool, str]:
        if device != "cpu":
            return False, f"{cls.__name__} claims only cpu"
        return True, ""

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        _import_paddle()
        from paddlenlp.transformers.model_utils import no_init_weights

        self.framework_dtype({"float32": paddle.float32})
        self.gpt_config = config_for(config.n_embd)
        with no_init_weights():  # load_tables or init_tables fills the tables
            self.model = self._build()

    def _build(self) -> GPTForCausalLM:
        from paddlenlp.transformers.gpt.modeling import GPTForCausalLM

        model = GPTForCausalLM(self.gpt_config)
        model.eval()
        return model

    @property
    def _wte(self):
        return self.model.gpt.embeddings.word_embeddings.weight

    @property
    def _wpe(self):
        return self.model.gpt.embeddings.position_embeddings.weight

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)
        self._wte.set_value(np.array(wte, np.float32, order="C"))
        self._wpe.set_value(np.array(wpe, np.float32, order="C"))

    def tables(self):
        return np.array(self._wte.numpy(), copy=True), np.array(self._wpe.numpy(), copy=True)

    def init_tables(self, seed):
        paddle.seed(seed)
        self.model = self._build()  # GPTPretrainedModel's own initialiser

    def assign_wte_row(self, index, values):
        with paddle.no_grad():
            self._wte[index] = paddle.to_tensor(np.asarray(values, np.float32))

    def parameters(self):
        out: dict[str, tuple[int, ...]] = {}
        seen: set[int] = set()
        for name, p in self.model.named_parameters():
            if name.startswith(("gpt.embeddings.", "lm_head.")) and id(p) not in seen:
                seen.add(id(p))
                out[name] = tuple(int(n) for n in p.shape)
        return out

    # -- forward ------------------------------------------------------------------
    def _cache(self, batch: int, past_length):
        past_length = _length(past_length)
        if isinstance(past_length, int) and past_length == 0:
            return None
        heads = self.gpt_config.num_attention_heads
        kv = paddle.zeros([batch, past_length, heads, HEAD_DIM], dtype="float32")
        return ((kv, kv),)

    def _h(self, ids, past_length):
        """The embeddings' output inside GPTModel.forward, the forward stopped right after it."""
        tensor = paddle.to_tensor(ids)
        batch = int(tensor.shape[0]) if tensor.ndim > 1 else 1
        past = self._cache(batch, past_length)
        caught = []

        def hook(layer, inputs, output):
            caught.append(output)
            raise _Stop

        handle = self.model.gpt.embeddings.register_forward_post_hook(hook)
        try:
            self.model.gpt(tensor, past_key_values=past, use_cache=past is not None, return_dict=True)
        except _Stop:
            pass
        finally:
            handle.remove()
        if not caught:
            raise RuntimeError("GPTModel.forward returned without calling its embeddings")
        return caught[0]

    def embed(self, ids, past_length=0):
        with paddle.no_grad():
            return np.array(self._h(ids, past_length).numpy(), copy=True)

    def logits(self, h_final):
        with paddle.no_grad():
            h = paddle.to_tensor(np.asarray(h_final, np.float32))
            return np.array(self.model.lm_head(h).numpy(), copy=True)

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        self.model.clear_gradients()
        h = self._h(ids, past_length)
        logits = self.model.lm_head(h)
        loss = (paddle.to_tensor(np.asarray(cotangent_h, np.float32)) * h).sum() + (
            paddle.to_tensor(np.asarray(cotangent_logits, np.float32)) * logits
        ).sum()
        loss.backward()
        wte_grad, wpe_grad = self._wte.grad, self._wpe.grad
        assert wte_grad is not None and wpe_grad is not None  # both reach the loss
        out = np.array(wte_grad.numpy(), copy=True), np.array(wpe_grad.numpy(), copy=True)
        self.model.clear_gradients()
        return out
