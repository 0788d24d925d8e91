"""The TensorFlow backend: GPT-2's embedding and tied head as a tf.Module (model.py) and its Adapter (adapter.py)."""

from gpt2_conformance.api.backend import REFERENCE, Backend

BACKEND = Backend(name="tensorflow", adapter="adapter:TensorFlowAdapter", requires=("tensorflow",),
                  kind=REFERENCE, extra="tensorflow", bench="bench",
                  bench_modes={"suite": (), "xla": (), "nocheck": ("forward",), "eager": (), "pretransposed": ("logits",)})
