"""Adapter for tract (Sonos' Rust inference engine, the PyPI wheel `tract`) running the ONNX graph
exported from Hugging Face's GPT2LMHeadModel: the same graph as onnxruntime-hf
(onnxruntime_hf/export.py), so the reports differ only where the engines differ. Judged as it is:
tract's operator implementations are the verdict.

What is observed, and how (Capabilities.black_box):

- the graph: the export as deployed, model.onnx with wte and wpe as external data files beside
  it (onnx_hf_common.write_model), loaded by tract.onnx().load (tract's ONNX loader, an
  InferenceModel), typed by into_model() from the graph's own input facts (symbolic batch,
  seq and past dimensions, int64 ids) and optimized for the default CPU runtime by
  into_runnable(), as tract's own README runs a model. A new Runnable per load_tables /
  init_tables: the tables are constants of the optimized model, with no in-place write that
  reaches it (mutable_tables is not claimed; TIED-STORAGE is "not claimed").
- h: the graph's "h" output (hidden_states[0]); logits: its "logits" output (the exported
  lm_head, MatMul(h_final, Transpose(wte))) on the h_final input. tract runs every output of a
  model on every run, and its optimized head packs the constant wte again on each run
  (OptMatMulPack node_linear.pack_a, the costliest node in Runnable.profile_json at d = 768), so
  a model that also holds the head costs that in every embed call. The adapter therefore
  loads the graph twice, each copy with one of its two outputs (write_model(outputs=...): the
  same nodes, the other output's branch dead), as a deployment that wants one output would;
  the two Runnables share nothing but the tables' values. Each is built by the first call that
  reads its output after the tables were set.
- the offset: the past_key/past_value inputs of length past_length, all zeros (np.zeros: their
  pages are never touched); the graph computes Shape(past_key)[2] -> Range -> Add ->
  Gather(wpe) itself.
- out of range: tract's Gather slices the table without a bounds check of its own, so an index
  past the end is a Rust panic; the panic cannot unwind through the C API (tract_state_run), so
  Rust aborts the process (SIGABRT). The suite's child processes turn that into a FAIL of the
  clause whose input did it, and the run goes on.
- tables(): the arrays handed to tract (in the model's dtype); a Runnable offers no read-back.
- init: HF's own init (onnx_hf_common), as onnxruntime-hf.

One limit of the adapter's own: the cache inputs are zeros whose pages numpy never touches, but
tract.Tensor.from_numpy copies every input (tract_tensor_from_bytes), so a cache of 10**6
entries would be 6 GB copied twice; the adapter refuses a cache over CACHE_LIMIT bytes (256
MiB: past_length over ~21,000 at batch 2, far past the 1024 positions) with a MemoryError
saying so. Every out-of-range position below that reaches tract.

Otherwise the adapter adds no checks: ids go to Runnable.run as they come (tract checks each input's type
and shape against the model's input facts); past_length becomes the cache's length through
np.zeros.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import tract

from gpt2_conformance.api.adapter import AdapterConfig, Capabilities
from gpt2_conformance.backends.thirdparty.onnx_hf_common import DTYPES, OnnxHFExportAdapter, exported_by, write_model

CACHE_LIMIT = 1 << 28  # bytes per cache input: tract copies every input (module docstring)


class TractHFAdapter(OnnxHFExportAdapter):
    capabilities = Capabilities(
        dtypes=tuple(DTYPES),
        devices=("cpu",),
        gradients=False,
        mutable_tables=False,
        black_box="HF GPT2LMHeadModel exported to ONNX (torch dynamo exporter, the onnxruntime-hf graph), loaded by "
        "tract's ONNX loader and run by its default CPU runtime; h = the hidden_states[0] output; offset = "
        "length of the past_key/past_value inputs; logits = the exported lm_head on an h_final input",
    )

    @classmethod
    def implementation(cls) -> str:
        return f"tract {tract.version()} (default CPU runtime) running {exported_by()}"

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        # output ("h", "logits") -> (its Runnable, its input names in order), built by the first
        # call that reads that output after load_tables / init_tables (runnable()): a test that
        # only embeds never builds the head's
        self.runnables: dict[str, tuple] = {}

    def _start(self, wte, wpe):
        self.runnables = {}  # the tables are read by runnable(), from self._wte / self._wpe (_set_tables)

    def runnable(self, output: str) -> tuple:
        """(tract's Runnable of the graph with this one output, its input names in order) for
        the tables set last; built on first use."""
        if output not in self.runnables:
            if self._wte is None or self._wpe is None:
                raise RuntimeError("no tables loaded: load_tables or init_tables comes first")
            folder = tempfile.mkdtemp(prefix="gpt2c-tract-")
            try:
                write_model(self.graph, self._wte, self._wpe, folder, outputs=(output,))
                model = tract.onnx().load(os.path.join(folder, f"{output}.onnx")).into_model()
                inputs = [model.input_name(i) for i in range(model.input_count())]
                if model.output_count() != 1:
                    raise RuntimeError(f"tract's model of the {output!r} output has {model.output_count()} outputs")
                self.runnables[output] = (model.into_runnable(), inputs)
            finally:
                shutil.rmtree(folder, ignore_errors=True)  # the loader has read the tables into the model
        return self.runnables[output]

    def _offset_feeds(self, ids, past_length) -> dict:
        feeds = super()._offset_feeds(ids, past_length)
        size = feeds["past_key"].nbytes
        if size > CACHE_LIMIT:
            raise MemoryError(
                f"TractHFAdapter: the cache input for past_length={past_length} would be {size} bytes, "
                f"and tract copies every input (tract_tensor_from_bytes); the adapter builds caches of at "
                f"most {CACHE_LIMIT} bytes (such a cache already puts every position past the 1024 of GPT-2)"
            )
        return feeds

    def _run(self, output, feeds):
        runnable, inputs = self.runnable(output)
        return runnable.run([feeds[name] for name in inputs])[0].to_numpy()
