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
- h: forward_batch(ids.tolist()) of the embedding model, ids as lists of Python ints as
  CTranslate2's own examples pass them.
- no offset: forward_batch runs whole sequences from position 0, and no API of the Python
  package runs given ids after a cache (generate_* pick their own next tokens), so kv_cache is
  not claimed. A sequence longer than 1024 still reaches the position bound.
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
from gpt2_conformance.backends.thirdparty.ctranslate2 import model


class CTranslate2Adapter(Adapter):
    capabilities = Capabilities(
        dtypes=("float32",), devices=("cpu",), kv_cache=False, tied_head=True, init=False, gradients=False,
        mutable_tables=False,
        black_box="GPT-2 decoder written with CTranslate2's TransformerDecoderModelSpec (one zero block, no final "
                  "norm), run by ctranslate2.Generator on the CPU; h = forward_batch's output with an identity head; "
                  "logits = its output projection (wte) on h_final rows written as a model's token table")

    @classmethod
    def implementation(cls) -> str:
        return f"CTranslate2 {ctranslate2.__version__} (CPU, float32) running a GPT-2 decoder spec written by the adapter"

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.framework_dtype({"float32": np.float32})
        self.generator = None
        self.head: model.HeadModel | None = None
        self._wte = self._wpe = None

    @property
    def intra_threads(self) -> int:
        return machine.cores()

    def _load(self, path: str, files: dict | None = None):
        return ctranslate2.Generator(path, device="cpu", compute_type="float32", intra_threads=self.intra_threads,
                                     files=files)

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        self._free()
        wte, wpe = np.array(wte, np.float32), np.array(wpe, np.float32)
        embedding = tempfile.mkdtemp(prefix="gpt2c-ct2-")
        try:
            self.generator = self._load(model.save_embedding_model(embedding, wte, wpe))
        finally:
            shutil.rmtree(embedding, ignore_errors=True)  # loaded: the Generator holds the weights
        self.head = model.HeadModel(wte)
        self._wte, self._wpe = wte, wpe

    def tables(self):
        return self._wte.copy(), self._wpe.copy()

    def parameters(self):
        """The spec's variables that the embedding and the head read: GPT-2's head is wte."""
        d = self.config.n_embd
        return {"decoder/embeddings/weight": (gpt2.N_VOCAB, d), "decoder/position_encodings/encodings": (gpt2.N_CTX, d)}

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        if past_length != 0:  # kv_cache is not claimed: never answer for positions it did not compute
            raise NotImplementedError(f"CTranslate2Adapter: past_length={past_length!r}, but CTranslate2's Python API "
                                      "runs given ids from position 0 only (kv_cache is not claimed)")
        ids = np.asarray(ids)
        return np.asarray(self.generator.forward_batch(ids.tolist()))

    def logits(self, h_final):
        h_final = np.asarray(h_final)
        rows = np.ascontiguousarray(h_final.reshape(-1, h_final.shape[-1]), np.float32)
        out = np.empty((len(rows), gpt2.N_VOCAB), np.float32)
        for start in range(0, len(rows), model.HEAD_ROWS):
            chunk = rows[start:start + model.HEAD_ROWS]
            self.head.write_rows(chunk)
            generator = self._load("gpt2c-ct2-head", files=self.head.files())  # a name, not a path: in memory
            out[start:start + len(chunk)] = np.asarray(generator.forward_batch([list(range(len(chunk)))]))[0]
            del generator
        return out.reshape(h_final.shape[:-1] + (gpt2.N_VOCAB,))

    def _free(self):
        self.generator = self.head = None
