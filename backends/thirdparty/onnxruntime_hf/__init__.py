"""Third-party backend: ONNX Runtime (CPUExecutionProvider) running the ONNX graph that torch's
exporter makes of Hugging Face's GPT2LMHeadModel (GPT2Config, random init, no hub). See
export.py, adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="onnxruntime-hf",
    adapter="adapter:OnnxRuntimeHFAdapter",
    requires=("torch", "transformers", "onnx", "onnxscript", "onnxruntime"),
    kind=JUDGED,
    wraps="HF `GPT2LMHeadModel` exported to ONNX by torch's dynamo exporter, run by onnxruntime's CPUExecutionProvider",
    extra="onnx",
    waivers="waivers.toml",
    bench="bench",
)
