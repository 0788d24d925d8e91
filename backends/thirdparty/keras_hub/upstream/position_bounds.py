"""PositionEmbedding does not check start_index and the sequence length against
sequence_length (1024 for GPT-2): past the end the result depends on the backend (a silent
clamp on JAX, a backend error naming the slice size on TensorFlow and PyTorch), never a clear
error naming the position.

Standalone: needs only keras-hub, Keras, its backend and numpy. Exits 1 while any of the four
out-of-range calls below returns or raises something other than IndexError/ValueError, 0 once
all four raise one. n_positions must be GPT-2's 1024 here."""

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


wpe = np.asarray(keras.ops.convert_to_numpy(backbone.position_embedding.position_embeddings))
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L152, L157): wpe has 1024 rows and tf.gather(wpe, positions) "
    "raises for a position >= 1024 on CPU ('indices[0,0] = 1024 is not in [0, 1024)')"
)
cases = [
    ("T = 1025 from start_index 0", 1025, 0),  # a prompt one token too long
    ("T = 1 at start_index 1024", 1, 1024),  # one decode step past the context
    ("T = 2 at start_index -1", 2, -1),  # a negative cache index
    ("T = 3 at start_index -1024", 3, -1024),
]
unclear = 0
for what, length, start in cases:
    tokens = backbone.token_embedding(np.zeros((1, length), dtype="int32"))
    try:
        out = np.asarray(keras.ops.convert_to_numpy(backbone.position_embedding(tokens, start_index=start)))
    except Exception as exc:  # noqa: BLE001
        print(f"got for {what}: {type(exc).__name__}: {message(exc)}")
        unclear += not isinstance(exc, (IndexError, ValueError))
        continue
    rows = [
        int(np.flatnonzero((wpe == row).all(axis=1))[0]) if (wpe == row).all(axis=1).any() else None for row in out[0]
    ]
    print(
        f"got for {what}: no error, shape {out.shape}, rows of wpe read: "
        f"{rows if len(rows) <= 4 else rows[:2] + ['...'] + rows[-2:]}"
    )
    unclear += 1
sys.exit(1 if unclear else 0)
