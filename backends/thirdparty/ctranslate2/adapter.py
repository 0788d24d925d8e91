"""Adapter for CTranslate2 (OpenNMT's C++ inference engine, the PyPI wheel `ctranslate2`) running
a GPT-2 decoder written with its own model specification (model.py). Judged as it is: its
embedding, position encoding, gather and output projection are the verdict.

What is observed, and how (Capabilities.black_box):

- the model: ctranslate2.specs.TransformerDecoderModelSpec as CTranslate2's GPT-2 converter
  fills it (learned position encodings, no embedding scale, pre-norm), one zero block (a model
  without one does not load: `variable decoder/layer_0/... not found`), the final layer norm
  off; saved with ModelSpec.save and loaded by ctranslate2.Generator on the CPU in float32.
  Generator.forward_batch, the API that returns a decoder's outputs for given ids, returns only
  the head's output for every position: the embedding model's head is the identity [d, d], so
  that output is h, bit for bit (model.py).
- h from position 0: forward_batch(ids.tolist()) of the embedding model, ids as lists of Python
  ints as CTranslate2's own examples pass them.
- h after a cache (past_length > 0): CTranslate2's own cached decode. generate_batch keeps the
  model's state after a static prompt (static_prompt, cache_static_prompt: the KV cache of
  past_length placeholder tokens, computed once per length and reused), then runs the row's
  tokens one step each (include_prompt_in_result: the decoding loop is constrained to them),
  and return_logits_vocab hands back each step's head output before any softmax: with the
  identity head that is h at past_length + t, bit for bit. So the offset is the engine's: the
  position it reads is the cache's length, never one the adapter passes. past_length has no
  counterpart in the API, so it becomes the prompt's length, made by np.full (numpy refuses a
  negative, fractional or bool length, as for llama-cpp). generate_batch takes tokens, not ids:
  id i is the vocabulary's token "<t{i}>" (model.py writes that vocabulary), so an id with no
  token becomes the unknown token, row 0, as CTranslate2's vocabulary maps any unknown token.
- logits: CTranslate2's own output projection with wte as its weight (GPT-2's tied head), run
  by the head model, whose token table holds h_final's rows (written into its model.bin, held
  in memory, before each load, HEAD_ROWS rows a load) at zero positions: forward_batch([[0, 1, ...]]).
- tables(): the arrays handed to CTranslate2; a Generator offers no read-back of a weight.

Not claimed: init (CTranslate2 converts trained models, it has no initialiser), gradients,
in-place table updates, float16/bfloat16 (CTranslate2 computes them on GPUs), the cache offset.
The adapter adds no check of its own.
"""

from __future__ import annotations

import shutil
import tempfile

import ctranslate2
import numpy as np

from gpt2_conformance.api import gpt2, machine
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables
from gpt2_conformance.backends.thirdparty.ctranslate2 import model


class CTranslate2Adapter(Adapter):
    capabilities = Capabilities(
        dtypes=("float32",),
        devices=("cpu",),
        kv_cache=True,
        tied_head=True,
        init=False,
        gradients=False,
        mutable_tables=False,
        black_box="GPT-2 decoder written with CTranslate2's TransformerDecoderModelSpec (one zero block, no final "
        "norm), run by ctranslate2.Generator on the CPU; h = forward_batch's output with an identity head; "
        "h after a cache = generate_batch's per-step head output after a cached static prompt of past_length tokens; "
        "logits = its output projection (wte) on h_final rows written as a model's token table",
    )

    @classmethod
    def implementation(cls) -> str:
        return (
            f"CTranslate2 {ctranslate2.__version__} (CPU, float32) running a GPT-2 decoder spec written by the adapter"
        )

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.framework_dtype({"float32": np.float32})
        self.generator: ctranslate2.Generator | None = None
        self.head: model.HeadModel | None = None
        self._wte: np.ndarray | None = None
        self._wpe: np.ndarray | None = None

    @property
    def intra_threads(self) -> int:
        return machine.threads()  # this process's share of the cores when several run at once

    def _load(self, path: str, files: dict | None = None):
        return ctranslate2.Generator(
            path, device="cpu", compute_type="float32", intra_threads=self.intra_threads, files=files
        )

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        self._free()
        wte, wpe = np.array(wte, np.float32), np.array(wpe, np.float32)
        embedding = tempfile.mkdtemp(prefix="gpt2c-ct2-")
        try:
            self.generator = self._load(model.save_embedding_model(embedding, wte, wpe))
        finally:
            shutil.rmtree(embedding, ignore_errors=True)  # loaded: the Generator holds the weights
        self._wte, self._wpe = wte, wpe  # the head model is written on the first logits call: most calls never need it

    def tables(self):
        return self._wte.copy(), self._wpe.copy()

    def parameters(self):
        """The spec's variables that the embedding and the head read: GPT-2's head is wte."""
        d = self.config.n_embd
        return {"decoder/embeddings/weight": (gpt2.N_VOCAB, d), "decoder/position_encodings/encodings": (gpt2.N_CTX, d)}

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        past = np.full(past_length, model.token(0))  # numpy refuses a negative, fractional or bool length
        ids = np.asarray(ids)
        if not past.size:
            return np.asarray(self.generator.forward_batch(ids.tolist()))
        return self._after_cache(ids, past.tolist())

    def _after_cache(self, ids, past: list[str]):
        """h at len(past) + t: each step's head output of generate_batch after the cached prompt."""
        if self.generator is None or self._wte is None:
            raise RuntimeError("no tables loaded: load_tables or init_tables comes first")
        results = self.generator.generate_batch(
            [[model.token(i) for i in row] for row in ids.tolist()],
            static_prompt=past,
            cache_static_prompt=True,
            include_prompt_in_result=True,
            max_length=ids.shape[-1],
            return_logits_vocab=True,
            beam_size=1,
            sampling_topk=1,
        )
        if not results:
            return np.zeros(ids.shape + (self._wte.shape[1],), np.float32)
        return np.stack([np.stack([np.asarray(step) for step in result.logits[0]]) for result in results])

    def logits(self, h_final):
        h_final = np.asarray(h_final)
        rows = np.ascontiguousarray(h_final.reshape(-1, h_final.shape[-1]), np.float32)
        out = np.empty((len(rows), gpt2.N_VOCAB), np.float32)
        if self.head is None:
            self.head = model.HeadModel(self._wte)
        for start in range(0, len(rows), model.HEAD_ROWS):
            chunk = rows[start : start + model.HEAD_ROWS]
            self.head.write_rows(chunk)
            generator = self._load("gpt2c-ct2-head", files=self.head.files())  # a name, not a path: in memory
            out[start : start + len(chunk)] = np.asarray(generator.forward_batch([list(range(len(chunk)))]))[0]
            del generator
        return out.reshape(h_final.shape[:-1] + (gpt2.N_VOCAB,))

    def _free(self):
        self.generator = self.head = None
