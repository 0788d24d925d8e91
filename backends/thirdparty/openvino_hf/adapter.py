"""Adapter for OpenVINO running the ONNX graph exported from Hugging Face's GPT2LMHeadModel: the
same graph as onnxruntime-hf (onnxruntime_hf/export.py), so the two reports differ only where
the engines differ. Judged as it is: OpenVINO's operator semantics are the verdict.

What is observed, and how (Capabilities.black_box):

- the graph: the export as deployed, model.onnx with wte and wpe as external data files beside
  it (onnx_hf_common.write_model), read by ov.Core().read_model (OpenVINO's ONNX frontend) and
  compiled for the CPU plugin. A new folder, model and compiled model per load_tables /
  init_tables: the tables are Constants of the compiled model, with no in-place write that
  reaches it (mutable_tables is not claimed; TIED-STORAGE is "not claimed").
- h: the graph's "h" output (hidden_states[0]), logits: its "logits" output (the exported
  lm_head, MatMul(h_final, Transpose(wte))) on the h_final input.
- the offset: the past_key input of length past_length, all zeros (np.zeros: its pages are
  never touched); the graph computes Shape(past_key)[2] -> Range -> Add -> Gather(wpe) itself.
  The feeds go in with share_inputs=True (OpenVINO wraps the numpy buffers, as ONNX Runtime
  reads them in place), so a cache of 10**6 entries costs no memory; only the compiled model's
  own inputs are fed (OpenVINO may drop an input that nothing reads).
- precision: compiled with INFERENCE_PRECISION_HINT = f32. The CPU plugin's default on a CPU
  with bfloat16 support (this project's machines report BF16 among
  OPTIMIZATION_CAPABILITIES) is bf16, which runs the head's MatMul on bfloat16 inputs, so the
  verdict would depend on the host's ISA; f32 is the model's own precision on every host
  (tests/backends/test_openvino_hf.py shows the default's logits differ where it is bf16).
- tables(): the arrays handed to OpenVINO (in the model's dtype): a compiled model offers no
  read-back of its constants.
- init: HF's own init (onnx_hf_common), as onnxruntime-hf.
- dtypes: float32 and float16 (the graph exported in that dtype); bfloat16 is not claimed, as
  for onnxruntime-hf (the same export, judged on the same claims).

The adapter adds no checks: ids go to the infer request as they come (OpenVINO's Python API
casts an array of another dtype to the port's int64: see waivers.toml); past_length becomes the
cache's length through np.zeros.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref

import numpy as np
import openvino as ov

from gpt2_conformance.api.adapter import AdapterConfig, Capabilities
from gpt2_conformance.backends.thirdparty.onnx_hf_common import DTYPES, OnnxHFExportAdapter, exported_by, write_model

DEVICE = "CPU"
COMPILE_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}  # the model's precision on every host (module docstring)


class OpenVINOHFAdapter(OnnxHFExportAdapter):
    capabilities = Capabilities(
        dtypes=tuple(DTYPES),
        devices=("cpu",),
        gradients=False,
        mutable_tables=False,
        black_box="HF GPT2LMHeadModel exported to ONNX (torch dynamo exporter, the onnxruntime-hf graph), read by "
        "OpenVINO's ONNX frontend and run by its CPU plugin (INFERENCE_PRECISION_HINT f32); h = the "
        "hidden_states[0] output; offset = length of the past_key input; logits = the exported lm_head "
        "on an h_final input",
    )

    @classmethod
    def implementation(cls) -> str:
        return f"OpenVINO {ov.get_version()} {DEVICE} plugin (INFERENCE_PRECISION_HINT f32) running {exported_by()}"

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.core = ov.Core()
        self.compiled = self.request = None  # built by load_tables / init_tables, which always come next
        self._inputs: set[str] = set()
        self._folder = self._removal = None  # the compiled model's folder, and what removes it

    def _start(self, wte, wpe):
        folder = tempfile.mkdtemp(prefix="gpt2c-openvino-")
        try:
            model = self.core.read_model(write_model(self.graph, wte, wpe, folder))
            compiled = self.core.compile_model(model, DEVICE, COMPILE_CONFIG)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self.compiled, self.request = compiled, compiled.create_infer_request()
        self._inputs = {name for port in compiled.inputs for name in port.get_names()}
        if self._removal:
            self._removal()
        # kept while the model may map its external data; a finalizer, not __del__, so that it also
        # runs in a process that exits without tearing its objects down (the suite's children)
        self._folder, self._removal = folder, weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)

    def _run(self, output, feeds):
        result = self.request.infer({k: v for k, v in feeds.items() if k in self._inputs}, share_inputs=True)
        return np.array(result[self.compiled.output(output)], copy=True)
