"""The adapter for keras-hub's GPT2Backbone (Keras 3), the implementation under test, on any Keras
backend: one class, KerasHubGPT2Adapter, and one two-line subclass per framework that names its
Keras backend (this folder's __init__.py makes an entry of each).

Keras reads KERAS_BACKEND once, when it is first imported, so one process holds one Keras
backend: this module imports keras only when the first adapter is built (the CLI's parent
process can resolve both adapters without importing keras), and raises
if keras is already loaded with another backend. Run each backend in its own process (the CLI
does; tests use gpt2_conformance.run.runner.run_backend).

The path is the model's own, as GPT2CausalLM.call_with_cache (keras_hub
src/models/gpt2/gpt2_causal_lm.py L184-188) runs it:

    tokens    = backbone.token_embedding(token_ids)                 # ReversibleEmbedding
    positions = backbone.position_embedding(tokens, start_index=i)  # PositionEmbedding
    h         = backbone.embeddings_add((tokens, positions))
    logits    = backbone.token_embedding(x, reverse=True)           # the tied head

with start_index = past_length (call_with_cache's cache_update_index). The backbone is built
from explicit arguments (no preset): GPT-2's vocabulary, 1024 positions, width n_embd, GPT-2's
head count, and no transformer block (num_layers=0): the embedding, its tables, their init and
the tied head are the same layers whatever follows them, and a suite run builds dozens of
adapters: without a block keras-hub-jax's run took half the time, with the same verdicts,
messages and parity digests (reports/performance.md). The reproduction scripts in
upstream/ build one block, as a user's model has blocks. init_tables seeds Keras
(keras.utils.set_random_seed) and builds a new backbone: its own initializers. The adapter adds
no checks: ids and past_length go to the layers as they come.

The backbone is built when the adapter is first used. When that first use is load_tables, it is
built with zero tables (keras-hub's one initializer function, patched for the build) and then
loaded: every row of both tables is replaced before anything reads them, and drawing the
model's own 39 million normals first is slow (threefry on the CPU, on JAX), and a verdict builds
about fifty adapters (reports/performance.md). Anything else first (tables,
embed, init_tables) reads the model's own initializers, as before.
"""

from __future__ import annotations

import os
import sys
from unittest import mock

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables

_N_HEAD = {768: 12, 1024: 16, 1280: 20, 1600: 25}
_DTYPES = ("float32", "float16", "bfloat16")  # GPT2Backbone(dtype=...): Keras dtype policies
# the function GPT2Backbone gets both tables' initializers from (keras_hub
# src/models/gpt2/gpt2_backbone.py L11-12, L92, L97)
INITIALIZER = "_gpt_2_kernel_initializer"


def import_keras(backend: str):
    """keras and keras_hub on `backend`; refuses a process where keras runs another backend."""
    loaded = sys.modules.get("keras")
    if loaded is not None:
        current = loaded.config.backend()
        if current != backend:
            raise RuntimeError(
                f"keras is already imported with backend {current!r} in this process; "
                f"the keras-hub {backend} adapter needs its own process (KERAS_BACKEND={backend})"
            )
    else:
        os.environ["KERAS_BACKEND"] = backend
    import keras
    import keras_hub

    return keras, keras_hub


def versions(backend: str) -> str:
    from importlib.metadata import version

    framework = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}[backend]
    return f"keras-hub {version('keras-hub')} GPT2Backbone (keras {version('keras')}, {framework} {version(framework)})"


class KerasHubGPT2Adapter(Adapter):
    capabilities = Capabilities(dtypes=_DTYPES, devices=("cpu",), gradients=False)
    KERAS_BACKEND = ""  # set by the subclass

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        if config.dtype not in _DTYPES or config.device != "cpu":
            raise ValueError(f"{type(self).__name__}: only {_DTYPES} on cpu are claimed, got {config}")
        self.keras, self.keras_hub = import_keras(self.KERAS_BACKEND)
        self._backbone = None  # built on first use (the module's docstring says why)

    @classmethod
    def implementation(cls) -> str:
        return versions(cls.KERAS_BACKEND)

    @classmethod
    def native_available(cls, device: str) -> tuple[bool, str]:
        """Whether the bench can time this Keras backend natively on device (bench.py)."""
        from gpt2_conformance.backends.thirdparty.keras_hub.bench import available

        return available(cls.KERAS_BACKEND, device)

    @property
    def backbone(self):
        if self._backbone is None:
            self._backbone = self._build()
        return self._backbone

    def _build(self, zero_tables: bool = False):
        d = self.config.n_embd

        def build():
            return self.keras_hub.models.GPT2Backbone(
                vocabulary_size=gpt2.N_VOCAB,
                num_layers=0,
                num_heads=_N_HEAD.get(d, 1),
                hidden_dim=d,
                intermediate_dim=4 * d,
                max_sequence_length=gpt2.N_CTX,
                dtype=self.config.dtype,
            )

        module = sys.modules[self.keras_hub.models.GPT2Backbone.__module__]
        if not zero_tables or not hasattr(module, INITIALIZER):  # another keras-hub: its own draws, slower
            return build()
        zeros = self.keras.initializers.Zeros
        with mock.patch.object(module, INITIALIZER, lambda stddev=0.02: zeros()):
            return build()

    # -- tables -------------------------------------------------------------------
    @property
    def _wte(self):
        return self.backbone.token_embedding.embeddings

    @property
    def _wpe(self):
        return self.backbone.position_embedding.position_embeddings

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        if self._backbone is None:  # both tables are replaced below: no draws to throw away
            self._backbone = self._build(zero_tables=True)
        self._wte.assign(np.array(wte))
        self._wpe.assign(np.array(wpe))

    def tables(self):
        return self._numpy(self._wte.value), self._numpy(self._wpe.value)

    def init_tables(self, seed):
        self.keras.utils.set_random_seed(seed)
        self._backbone = self._build()

    def assign_wte_row(self, index, values):
        ops = self.keras.ops
        row = ops.cast(np.asarray(values, np.float32)[None, :], self._wte.dtype)
        self._wte.assign(ops.slice_update(self._wte.value, (index, 0), row))

    def parameters(self):
        keep = ("token_embedding", "position_embedding")
        return {
            v.path: tuple(int(n) for n in v.shape) for v in self.backbone.trainable_weights if v.path.startswith(keep)
        }

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        b = self.backbone
        token_ids = self.keras.ops.convert_to_tensor(ids)
        tokens = b.token_embedding(token_ids)
        positions = b.position_embedding(tokens, start_index=past_length)
        return self._numpy(b.embeddings_add((tokens, positions)))

    def logits(self, h_final):
        h = self.keras.ops.convert_to_tensor(np.ascontiguousarray(h_final))
        return self._numpy(self.backbone.token_embedding(h, reverse=True))

    def _numpy(self, x) -> np.ndarray:
        """A numpy copy; bfloat16 (ml_dtypes in numpy) comes back as float32, exactly."""
        out = np.array(self.keras.ops.convert_to_numpy(x))
        return out.astype(np.float32) if out.dtype.name == "bfloat16" else out


class KerasHubTensorFlowAdapter(KerasHubGPT2Adapter):
    KERAS_BACKEND = "tensorflow"


class KerasHubJaxAdapter(KerasHubGPT2Adapter):
    KERAS_BACKEND = "jax"


class KerasHubTorchAdapter(KerasHubGPT2Adapter):
    KERAS_BACKEND = "torch"
