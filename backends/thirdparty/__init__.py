"""Implementations we did not write, judged as they are: one folder each with adapter.py (the
glue that observes the implementation's own h, offset and head, adding no checks) and
waivers.toml (each known deviation with its source line). Shared glue for one library family
sits beside them (torch_blackbox.py, keras_hub_common.py). Reports: `gpt2-conformance thirdparty`."""
