"""Third-party backend: OpenAI's own GPT-2 `src/model.py` (the code the spec quotes), as gpt-2-simple
ships it, run on TensorFlow 2 through `tf.compat.v1` in graph mode. See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="openai-gpt2-tf1",
    adapter="adapter:OpenAIGPT2TF1Adapter",
    requires=("tensorflow", "gpt_2_simple"),
    kind=JUDGED,
    wraps="OpenAI's `src/model.py` `model()` (gpt-2-simple's copy) in TensorFlow `tf.compat.v1` graph mode; "
    "h the fetched tensor of its `tf.gather(wte, X) + tf.gather(wpe, ...)`, logits its tied `matmul` fed h_final",
    extra="openai-gpt2-tf1",
    waivers="waivers.toml",
    # no child_env: a tf.compat.v1 graph on the CPU is not compiled ahead (no XLA), so there is no cache to keep
)
