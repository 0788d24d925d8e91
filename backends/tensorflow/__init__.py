"""The TensorFlow backend: GPT-2's embedding and tied head as a tf.Module (model.py) and its Adapter (adapter.py)."""

from gpt2_conformance.api.backend import REFERENCE, Backend

# `import tensorflow` imports all of Keras 3 where it is installed (tensorflow/__init__.py loads
# keras.src.optimizers eagerly; with it pandas and matplotlib): 1.4-1.6 s of a 6 s import on 2
# cores, in every suite process. The reference never touches tf.keras, so its processes ask for
# the legacy tf_keras instead, which TensorFlow looks for, does not find, and skips.
BACKEND = Backend(name="tensorflow", adapter="adapter:TensorFlowAdapter", requires=("tensorflow",),
                  kind=REFERENCE, extra="tensorflow", bench="bench",
                  bench_modes={"suite": (), "xla": (), "nocheck": ("forward",), "eager": (), "pretransposed": ("logits",)},
                  child_env={"TF_USE_LEGACY_KERAS": "1"})
