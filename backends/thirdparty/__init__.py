"""Implementations we did not write, judged as they are: one folder each with adapter.py (the
glue that observes the implementation's own h, offset and head, adding no checks) and
waivers.toml (each known deviation with its source line). Shared glue for one library family
sits beside them (torch_blackbox.py, onnx_hf_common.py); one implementation on several
frameworks is one folder with an entry per framework (keras_hub). Reports: `gpt2-conformance thirdparty`."""
