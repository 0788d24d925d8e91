"""GPT2Backbone initialises the token embedding with stddev 0.01 and the position embedding
with 0.02: GPT-2 does the opposite (wte 0.02, wpe 0.01).

Standalone: needs only keras-hub, Keras, its backend and numpy. Exits 1 while the two stds are
swapped, 0 once they are GPT-2's. The stddev is a constant of the initializer, independent of
the width."""

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

wte = np.asarray(keras.ops.convert_to_numpy(backbone.token_embedding.embeddings))
wpe = np.asarray(keras.ops.convert_to_numpy(backbone.position_embedding.position_embeddings))
print(f"got: token_embedding std {wte.std():.4f}, position_embedding std {wpe.std():.4f}")
print("GPT-2 reference (openai/gpt-2 src/model.py L152-155): wte ~ N(0, 0.02^2), wpe ~ N(0, 0.01^2)")
sys.exit(0 if abs(wte.std() - 0.02) < 0.001 and abs(wpe.std() - 0.01) < 0.001 else 1)
