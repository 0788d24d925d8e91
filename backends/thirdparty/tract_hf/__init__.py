"""Third-party backend: tract (Sonos' Rust inference engine, PyPI wheel `tract`) running the ONNX
graph that the onnxruntime-hf backend runs (torch's exporter on Hugging Face's GPT2LMHeadModel;
onnxruntime_hf/export.py), read by tract's ONNX loader. See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="tract-hf",
    adapter="adapter:TractHFAdapter",
    requires=("torch", "transformers", "onnx", "onnxscript", "tract"),
    kind=JUDGED,
    wraps=(
        "the same ONNX graph, loaded by tract's ONNX loader and run by its default CPU runtime (one model per output)"
    ),
    extra="tract",
    waivers="waivers.toml",
    bench="bench",
)
