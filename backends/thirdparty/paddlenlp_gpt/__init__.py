"""Third-party backend: PaddleNLP's own GPT (paddlenlp.transformers.gpt GPTForCausalLM, one layer,
GPT-2's sizes) on PaddlePaddle's CPU kernels. PaddleNLP pins huggingface_hub < 0.26 and datasets < 3,
which transformers 5 cannot share, so its suite runs in an environment of its own
(`gpt2-conformance env paddlenlp-gpt` builds it from the pins below). See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend, Environment

# The pins that import together on Python 3.11: paddlenlp 2.8.1 imports huggingface_hub's
# repo_type_and_id_from_hf_id (gone after 0.25) and aistudio_sdk.hub.download (gone in 0.3);
# pyarrow 17 is the last that builds on numpy 1.26 (tool_helpers, a paddlenlp dependency, pins numpy <= 1.26.4).
PINS = (
    "paddlepaddle==3.3.1",
    "paddlenlp==2.8.1",
    "huggingface_hub==0.25.2",
    "datasets==2.21.0",
    "aistudio-sdk==0.2.6",
    "pyarrow==17.0.0",
)

BACKEND = Backend(
    name="paddlenlp-gpt",
    adapter="adapter:PaddleNLPGPTAdapter",
    requires=("paddle", "paddlenlp"),
    kind=JUDGED,
    wraps="PaddleNLP's `GPTForCausalLM` (1 layer, GPT-2's sizes) on PaddlePaddle's CPU kernels, in an environment of "
    "its own; h is `gpt.embeddings`' output (a forward post-hook), logits its tied `lm_head(h)`",
    extra="",
    waivers="waivers.toml",
    environment=Environment(requirements=PINS),
)
