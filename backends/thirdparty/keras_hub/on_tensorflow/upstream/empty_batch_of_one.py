"""On the TensorFlow backend, adding the token and position embeddings of an empty sequence
fails for a batch of one ([1, 0, d]): keras.ops.add takes the second operand for a bias and
calls tf.nn.bias_add. A batch of three ([3, 0, d]) works.

Standalone: needs only keras-hub, Keras, TensorFlow and numpy. Exits 1 while [1, 0] ids raise,
0 once they give a [1, 0, d] result. The width does not matter."""

import os

os.environ["KERAS_BACKEND"] = "tensorflow"  # Keras reads it once, when first imported
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import sys

import keras_hub
import numpy as np

# GPT-2 as keras-hub builds it, from explicit arguments (no preset, no download), random init;
# the path is GPT2CausalLM.call_with_cache's: token_embedding, position_embedding, embeddings_add
WIDTH = 64
backbone = keras_hub.models.GPT2Backbone(
    vocabulary_size=50257,
    num_layers=1,
    num_heads=1,
    hidden_dim=WIDTH,
    intermediate_dim=4 * WIDTH,
    max_sequence_length=1024,
)
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L141-144, L157): positions_for uses tf.range(nsteps), so an "
    "empty X of shape [1, 0] gives an empty [1, 0, n_embd] h"
)
for batch in (3, 1):
    tokens = backbone.token_embedding(np.zeros((batch, 0), dtype="int32"))
    positions = backbone.position_embedding(tokens, start_index=0)
    try:
        h = backbone.embeddings_add((tokens, positions))
    except Exception as exc:  # noqa: BLE001
        text = str(exc).replace("\x1b[1m", "").replace("\x1b[0m", "")  # Keras bolds the inner message
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        own = [line for line in lines if not line.startswith(("Exception encountered", "Arguments received", "•"))]
        print(f"got for ids of shape [{batch}, 0]: {type(exc).__name__}: {(own or lines)[0]}")
        sys.exit(1)
    print(f"got for ids of shape [{batch}, 0]: h of shape {tuple(h.shape)}")
sys.exit(0)
