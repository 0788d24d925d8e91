"""On the PyTorch backend, keras.layers.Embedding casts int64 ids to int32: Embedding.call
compares the torch dtype with the strings "int32"/"int64", which never match, so every ids
tensor goes through ops.cast(inputs, "int32"), and 2**32 + 5 silently reads row 5.

Standalone: needs only keras-hub, Keras, PyTorch and numpy. Exits 1 while the int64 id
2**32 + 5 returns a row, 0 once it raises (an out-of-range id). The width does not matter."""

import os

os.environ["KERAS_BACKEND"] = "torch"  # Keras reads it once, when first imported

import sys

import keras
import keras_hub
import numpy as np

# GPT-2 as keras-hub builds it, from explicit arguments (no preset, no download), random init
WIDTH = 64
backbone = keras_hub.models.GPT2Backbone(
    vocabulary_size=50257,
    num_layers=1,
    num_heads=1,
    hidden_dim=WIDTH,
    intermediate_dim=4 * WIDTH,
    max_sequence_length=1024,
)
ids = keras.ops.convert_to_tensor(np.array([[2**32 + 5]], dtype=np.int64))
print(
    f"ids dtype as the layer sees it: {ids.dtype}; Embedding.call tests inputs.dtype != 'int64': {ids.dtype != 'int64'}"
)
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): wte has 50257 rows; tf.gather(wte, X) with the "
    "int64 id 4294967301 raises ('indices[0,0] = 4294967301 is not in [0, 50257)')"
)
try:
    row = np.asarray(keras.ops.convert_to_numpy(backbone.token_embedding(ids)))[0, 0]
except Exception as exc:  # noqa: BLE001
    print(f"got: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}")
    sys.exit(0)
table = np.asarray(keras.ops.convert_to_numpy(backbone.token_embedding.embeddings))
same = np.flatnonzero((table == row).all(axis=1))
print(f"got: no error; id 4294967301 returned {f'row {int(same[0])}' if same.size else 'a row not in'} of the table")
sys.exit(1)
