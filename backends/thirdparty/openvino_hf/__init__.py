"""Third-party backend: OpenVINO (CPU plugin) running the ONNX graph that the onnxruntime-hf backend
runs (torch's exporter on Hugging Face's GPT2LMHeadModel; onnxruntime_hf/export.py), read by
OpenVINO's ONNX frontend. See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="openvino-hf",
    adapter="adapter:OpenVINOHFAdapter",
    requires=("torch", "transformers", "onnx", "onnxscript", "openvino"),
    kind=JUDGED,
    wraps="the same ONNX graph, read by OpenVINO's ONNX frontend and run by its CPU plugin (precision hint f32)",
    extra="openvino",
    waivers="waivers.toml",
    bench="bench",
)
