"""The token embedding does not reject ids outside [0, vocabulary_size): id -1 silently reads
the last row (and, on JAX, id 50257 returns a row of NaN).

Standalone: needs only keras-hub, Keras, its backend and numpy. Exits 1 while either id below is
looked up without an error, 0 once both raise."""

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


table = np.asarray(keras.ops.convert_to_numpy(backbone.token_embedding.embeddings))
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): wte has 50257 rows (ids 0..50256) and "
    "tf.gather(wte, X) on CPU raises for -1 and 50257 ('indices[0,0] = -1 is not in [0, 50257)')"
)
silent = 0
for bad in (-1, 50257):
    try:
        row = np.asarray(keras.ops.convert_to_numpy(backbone.token_embedding(np.array([[bad]], dtype="int32"))))[0, 0]
    except Exception as exc:  # noqa: BLE001
        print(f"got for id {bad}: {type(exc).__name__}: {message(exc)}")
        continue
    same = np.flatnonzero((table == row).all(axis=1))
    what = (
        f"row {int(same[0])} of the table"
        if same.size
        else "a row of NaN"
        if np.isnan(row).all()
        else "a row that is not in the table"
    )
    print(f"got for id {bad}: no error, returned {what}")
    silent += 1
sys.exit(1 if silent else 0)
