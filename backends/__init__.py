"""The built-in backends, one folder each, named after the backend (`-` as `_`), with the same
file names in every folder:

    __init__.py   BACKEND = Backend(...): the backend's one registry entry (gpt2_conformance.api.backend);
                  one implementation on several frameworks (keras_hub) has BACKENDS, an entry each
    adapter.py    the Adapter around the implementation: numpy in, numpy out
    model.py      the implementation, idiomatic in that framework (our reference backends)
    bench.py      the bench hooks: modes with a Runner (ours), native_bench (judged ones)
    waivers.toml  each known deviation with its source line (judged ones)

Implementations we did not write sit under thirdparty/, with the glue a library family shares
beside them (torch_blackbox.py, onnx_hf_common.py). Only a folder's adapter, model and bench
import its framework, so reading the entries imports none.

Adding a backend: its folder, and one line below. Everything else (`list`, `run --backend all`,
the bench, tox, the README's tables, the third-party reports) reads the entry or is checked
against it by tests/test_registry.py.
"""

FOLDERS = (
    "numpy",
    "torch",
    "tensorflow",
    "jax",
    "thirdparty.hf_transformers",
    "thirdparty.torch_compile_hf",
    "thirdparty.keras_hub",
    "thirdparty.transformer_lens",
    "thirdparty.mlx_lm",
    "thirdparty.onnxruntime_hf",
    "thirdparty.openvino_hf",
    "thirdparty.tract_hf",
    "thirdparty.llama_cpp",
    "thirdparty.ctranslate2",
    "thirdparty.tinygrad_gpt2",
    "thirdparty.executorch_hf",
    "thirdparty.openai_gpt2_tf1",
    "thirdparty.iree_hf",
    "thirdparty.ncnn_hf",
    "thirdparty.tvm_relax_hf",
    "thirdparty.paddlenlp_gpt",
)
