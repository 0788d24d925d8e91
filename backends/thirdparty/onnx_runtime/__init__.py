"""Third-party backend: ONNX Runtime (CPUExecutionProvider) running the ONNX graph that torch's
exporter makes of Hugging Face's GPT2LMHeadModel (GPT2Config, random init, no hub). See
export.py, adapter.py and waivers.toml."""
