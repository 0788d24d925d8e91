"""The token embedding accepts float ids and truncates them to int32: [1.7, 2.2] silently reads
rows 1 and 2.

Standalone: needs only keras-hub, Keras, its backend and numpy. Exits 1 while float ids are
looked up, 0 once they raise."""

import os

os.environ["KERAS_BACKEND"] = "{{KERAS_BACKEND}}"  # Keras reads it once, when first imported

import sys

import keras
import keras_hub
import numpy as np

# GPT-2 as keras-hub builds it, from explicit arguments (no preset, no download), random init:
# GPT-2's vocabulary (50257) and context (1024), one block. WIDTH is small because nothing
# shown here depends on it.
WIDTH = 64
keras.utils.set_random_seed(0)
backbone = keras_hub.models.GPT2Backbone(
    vocabulary_size=50257,
    num_layers=1,
    num_heads=1,
    hidden_dim=WIDTH,
    intermediate_dim=4 * WIDTH,
    max_sequence_length=1024,
)


def message(exc):
    """The error's own message: Keras wraps a layer's exception in "Exception encountered when
    calling ...", with the original message on a line of its own."""
    lines = [line.strip() for line in str(exc).replace("\x1b[1m", "").replace("\x1b[0m", "").splitlines()]
    own = [line for line in lines if line and not line.startswith(("Exception encountered", "Arguments received", "•"))]
    return own[0] if own else str(exc)


ids = np.array([[1.7, 2.2]], dtype="float32")
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L157): tf.gather(wte, X) rejects float X "
    "(TypeError: Value for attr 'Tindices' of float is not in the list of allowed values: int16, int32, int64)"
)
try:
    rows = np.asarray(keras.ops.convert_to_numpy(backbone.token_embedding(ids)))
except Exception as exc:  # noqa: BLE001
    print(f"got: {type(exc).__name__}: {message(exc)}")
    sys.exit(0)
table = np.asarray(keras.ops.convert_to_numpy(backbone.token_embedding.embeddings))
same = [int(np.flatnonzero((table == row).all(axis=1))[0]) for row in rows[0]]
print(f"got: no error; ids [1.7, 2.2] returned rows {same} of the table")
sys.exit(1)
