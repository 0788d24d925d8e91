"""Built-in backend adapters, one folder per framework with the same file names in each:

    backends/<framework>/model.py    the implementation, idiomatic in that framework
    backends/<framework>/adapter.py  the Adapter (conformance/adapter.py) around it: numpy in, numpy out

Only a folder's own modules import its framework, so `backends` itself stays import-light.
Registered names map to "module:attribute" and are resolved lazily by conformance.registry.
"""

BUILTIN = {
    "numpy": "backends.numpy.adapter:NumpyAdapter",
    "torch": "backends.torch.adapter:TorchAdapter",
    "tensorflow": "backends.tensorflow.adapter:TensorFlowAdapter",
    "jax": "backends.jax.adapter:JaxAdapter",
    # third-party implementations, judged as they are (no checks added; deviations waived
    # with evidence in each folder's waivers.toml, reports in reports/)
    "hf-transformers": "backends.thirdparty.hf_transformers.adapter:HFTransformersAdapter",
    "keras-hub-tensorflow": "backends.thirdparty.keras_hub_tensorflow.adapter:KerasHubTensorFlowAdapter",
    "keras-hub-jax": "backends.thirdparty.keras_hub_jax.adapter:KerasHubJaxAdapter",
    "keras-hub-torch": "backends.thirdparty.keras_hub_torch.adapter:KerasHubTorchAdapter",
    "transformer-lens": "backends.thirdparty.transformer_lens.adapter:TransformerLensAdapter",
    "mlx-lm": "backends.thirdparty.mlx_lm.adapter:MlxLmAdapter",
    "onnxruntime-hf": "backends.thirdparty.onnx_runtime.adapter:OnnxRuntimeHFAdapter",
}

# The framework each backend imports: `--backend all` skips a backend whose framework is not
# installed (and says so) instead of failing on it.
REQUIRES = {
    "numpy": ("numpy",), "torch": ("torch",), "tensorflow": ("tensorflow",), "jax": ("jax",),
    "hf-transformers": ("torch", "transformers"),
    "keras-hub-tensorflow": ("keras_hub", "keras", "tensorflow"),
    "keras-hub-jax": ("keras_hub", "keras", "jax"),
    "keras-hub-torch": ("keras_hub", "keras", "torch"),
    "transformer-lens": ("torch", "transformer_lens"),
    "mlx-lm": ("mlx", "mlx_lm"),
    "onnxruntime-hf": ("torch", "transformers", "onnx", "onnxscript", "onnxruntime"),
}

# Implementations we did not write: judged as they are, with waivers and a report each
THIRD_PARTY = ("hf-transformers", "keras-hub-tensorflow", "keras-hub-jax", "keras-hub-torch", "transformer-lens",
               "mlx-lm", "onnxruntime-hf")
