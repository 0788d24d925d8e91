"""The two CTranslate2 models the adapter runs, written with CTranslate2's own model
specification (ctranslate2.specs.TransformerDecoderModelSpec, the spec its GPT-2 converter
fills: converters/transformers.py GPT2Loader) and saved with ModelSpec.save.

CTranslate2 loads no model without a block (decoder/layer_0 must exist), so each has one
transformer block whose weights and biases are zero: attention and MLP both add +0.0 to the
residual stream, which leaves every non-zero value's bits as they are. Its MLP is one unit wide
(CTranslate2 reads the width from the weights' shapes): at GPT-2's 4d a zero MLP would cost most
of each call for nothing. The final layer norm is off (no_final_norm, a documented option of the
spec), so the head reads the stream itself.

- the embedding model: token and position tables as given, the head (`projection`) the identity
  [d, d], so the output's d columns are h itself: the projection's GEMM multiplies each h row
  by one 1.0 and d - 1 zeros and adds, which is exact.
- the head model: the head (`projection`) is wte, as GPT-2 ties it (the converter writes
  lm_head.weight, which is wte); its "token table" holds the h_final rows to project and its
  position table is zero, so token k at position k reaches the head as h_final[k] + 0.0. The
  rows are written into its model.bin, held in memory (HeadModel.write_rows), before each load.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
from ctranslate2.specs import common_spec, transformer_spec

from gpt2_conformance.api import gpt2

HEAD_DIM = 64  # GPT-2's heads are 64 wide: 12 at d = 768 ... 25 at d = 1600
FFN_WIDTH = 1  # the zero block's MLP width (save())
HEAD_ROWS = 64  # h_final rows one load of the head model projects


def token(i) -> str:
    """The vocabulary's token for id i (generate_batch takes tokens, forward_batch ids)."""
    return f"<t{i}>"


def save(folder: str, token_table: np.ndarray, position_table: np.ndarray, projection: np.ndarray) -> str:
    """A GPT-2-shaped decoder (module docstring) saved in `folder`; returns the folder."""
    d = token_table.shape[1]
    spec = transformer_spec.TransformerDecoderModelSpec.from_config(
        1, max(1, d // HEAD_DIM), pre_norm=True, activation=common_spec.Activation.GELUTanh, no_final_norm=True
    )
    decoder = spec.decoder
    decoder.scale_embeddings = False  # GPT2Loader.set_decoder: GPT-2 does not scale by sqrt(d)
    decoder.embeddings.weight = token_table
    decoder.position_encodings.encodings = position_table
    zeros = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    for layer in decoder.layer:
        for norm in (layer.self_attention.layer_norm, layer.ffn.layer_norm):
            norm.gamma, norm.beta = np.ones(d, np.float32), zeros(d)
        qkv, out = layer.self_attention.linear
        qkv.weight, qkv.bias = zeros(3 * d, d), zeros(3 * d)
        out.weight, out.bias = zeros(d, d), zeros(d)
        # one unit wide (module docstring)
        layer.ffn.linear_0.weight, layer.ffn.linear_0.bias = zeros(FFN_WIDTH, d), zeros(FFN_WIDTH)
        layer.ffn.linear_1.weight, layer.ffn.linear_1.bias = zeros(d, FFN_WIDTH), zeros(d)
    decoder.projection.weight = projection
    decoder.projection.bias = zeros(projection.shape[0])
    spec.register_vocabulary([token(i) for i in range(token_table.shape[0])])
    spec.config.bos_token = spec.config.eos_token = spec.config.unk_token = token(0)
    spec.validate()
    spec.optimize(quantization="float32")
    spec.save(folder)
    return folder


def save_embedding_model(folder: str, wte: np.ndarray, wpe: np.ndarray) -> str:
    return save(folder, wte, wpe, np.eye(wte.shape[1], dtype=np.float32))


class HeadModel:
    """The head model's files, held in memory (CTranslate2 loads a model from memory with
    Generator(..., files=...)), with a writable view of its token table inside model.bin: nothing
    stays on disk, so a process that a bad input kills leaves no model behind."""

    def __init__(self, wte: np.ndarray):
        d = wte.shape[1]
        # a marker no float32 table of random values holds: rows of -(1..HEAD_ROWS*d) / 3
        marker = -(np.arange(1, HEAD_ROWS * d + 1, dtype=np.float32) / 3).reshape(HEAD_ROWS, d)
        folder = tempfile.mkdtemp(prefix="gpt2c-ct2-head-")
        try:
            save(folder, marker, np.zeros((gpt2.N_CTX, d), np.float32), wte)
            self._files = {}
            for name in os.listdir(folder):
                with open(os.path.join(folder, name), "rb") as f:
                    self._files[name] = bytearray(f.read())
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        data = self._files["model.bin"]
        offset = data.find(marker.tobytes())
        if offset < 0 or data.find(marker.tobytes(), offset + 1) >= 0:
            raise RuntimeError("CTranslate2's model.bin does not hold the head model's token table once, as written")
        self.table = np.frombuffer(data, np.float32, count=marker.size, offset=offset).reshape(HEAD_ROWS, d)

    def write_rows(self, rows: np.ndarray) -> None:
        """rows [n <= HEAD_ROWS, d] float32 become tokens 0..n-1 of the model."""
        self.table[: len(rows)] = rows

    def files(self) -> dict[str, bytes]:
        """The model's files as they are now, for Generator(..., files=...) (it takes bytes)."""
        return {name: bytes(content) for name, content in self._files.items()}
