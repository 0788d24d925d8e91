"""Third-party backend: Tencent's ncnn running Hugging Face's GPT2LMHeadModel (GPT2Config, random
init, no hub) converted to ncnn's .param/.bin by pnnx. See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import CACHE, JUDGED, Backend

BACKEND = Backend(
    name="ncnn-hf",
    adapter="adapter:NcnnHFAdapter",
    requires=("torch", "transformers", "pnnx", "ncnn"),
    kind=JUDGED,
    wraps="transformers `GPT2LMHeadModel` converted by pnnx to ncnn (.param/.bin, float32), run by ncnn's "
    "Python `Extractor`; h and the logits are two outputs of the converted net, positions "
    "(past_length + t) handed in by the host",
    extra="ncnn",
    waivers="waivers.toml",
    # the converted .param and the .bin's layout, kept between the suite's processes and runs
    # (a conversion traces the model with torch and runs pnnx, per width)
    child_env={"GPT2C_NCNN_CACHE": CACHE},
)
