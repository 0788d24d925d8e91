"""Adapter for ONNX Runtime running the ONNX graph exported from Hugging Face's GPT2LMHeadModel:
the graph deployment users run. Judged as it is: ONNX's Gather semantics and ORT's own checks
are the verdict.

What is observed, and how (Capabilities.black_box):

- the graph: export.py, torch's dynamo exporter on GPT2LMHeadModel's own forward (GPT2Config,
  no hub), inputs input_ids [B, T] (int64, as exported), past_key/past_value [B, n_head, past,
  head_dim] (the cache; `past` is the offset) and h_final; outputs h = hidden_states[0] and
  lm_head(h_final). Run by onnxruntime.InferenceSession on the CPUExecutionProvider with ORT's
  default session options (every graph optimization on), as a deployment would.
- the cache offset: past_key/past_value of length past_length, all zeros (h does not depend on
  their values). They come from np.zeros, whose pages are never touched since the graph reads
  only their shape, so a cache of 10**6 entries costs no memory. Optimum's ORTModelForCausalLM
  also feeds position_ids computed on the host; this backend does not, so that the offset
  arithmetic judged is the graph's own (Shape(past_key)[2] -> Range -> Add -> Gather(wpe)).
  OnnxRuntimeHFPositionIdsAdapter below is that other graph (not registered).
- the exporter: torch's dynamo exporter keeps the tie. The TorchScript exporter
  (dynamo=False) folds lm_head's Transpose(wte) into a second [d, V] initializer at export
  time (tests/backends/test_onnxruntime_hf.py), so its file holds the table twice and a new wte would
  not reach the head.
- the tables: the exported graph keeps the tie (one [50257, d] initializer feeds the token
  Gather and the head's Transpose -> MatMul; tests/backends/test_onnxruntime_hf.py checks it). The tables
  reach ORT as that graph's external initializers (SessionOptions.add_external_initializers):
  a new session per load_tables/init_tables. ORT copies them into the session, and its
  constant folding turns Transpose(wte) into a second, transposed table for the head, so a
  running session holds wte twice and there is no in-place write that reaches both
  (mutable_tables is not claimed; TIED-STORAGE is "not claimed"). SessionOptions.add_initializer
  (a zero-copy shared buffer) is not used: ORT's constant folder does not see such a buffer and
  folds the model file's own table into the head (seen while building this adapter: the head
  read the exported zeros while the Gather read the shared buffer).
- tables(): the arrays handed to ORT (in the model's dtype), since ORT offers no read-back.
- init: torch.manual_seed(seed) then GPT2LMHeadModel(config): HF's own init, whose tables are
  what an export of that model would hold; they go into a new session.
- dtypes: the model exported in that dtype (model.to(dtype)), tables rounded by torch as
  model.to(dtype) rounds them. bfloat16 is not claimed: the graph exports, but the CPU
  provider has no bfloat16 Add kernel (NOT_IMPLEMENTED at session creation; a test checks it).

The engine-independent part (the export, tables, init, parameters, the cache feeds) is
../onnx_hf_common.py, shared with openvino-hf and tract-hf, which run the same graph.

The adapter adds no checks: ids go to session.run as they come (ORT checks the input's type and
rank against the graph), past_length becomes the cache's length through np.zeros (which rejects
negative, fractional and bool sizes: that, not the graph, is what BOUNDS-PAST-LENGTH sees).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from gpt2_conformance.api.adapter import AdapterConfig, Capabilities
from gpt2_conformance.backends.thirdparty.onnx_hf_common import DTYPES, OnnxHFExportAdapter, exported_by

PROVIDER = "CPUExecutionProvider"


class OnnxRuntimeHFAdapter(OnnxHFExportAdapter):
    capabilities = Capabilities(
        dtypes=tuple(DTYPES),
        devices=("cpu",),
        gradients=False,
        mutable_tables=False,
        black_box="HF GPT2LMHeadModel exported to ONNX (torch dynamo exporter), run by onnxruntime "
        "CPUExecutionProvider; h = hidden_states[0] output; offset = length of the past_key/"
        "past_value inputs; logits = the exported lm_head on an h_final input",
    )

    @classmethod
    def implementation(cls) -> str:
        return f"onnxruntime {ort.__version__} {PROVIDER} running {exported_by()}"

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.session = None  # built by load_tables / init_tables, which always come next

    def _start(self, wte: np.ndarray, wpe: np.ndarray) -> None:
        """A new InferenceSession of the exported graph holding (wte, wpe), already in the model dtype."""
        options = ort.SessionOptions()
        options.log_severity_level = 4  # ORT also logs every failed run at ERROR; the exception says it all
        values = [ort.OrtValue.ortvalue_from_numpy(t) for t in (wte, wpe)]
        options.add_external_initializers([self.graph.wte_name, self.graph.wpe_name], values)
        self.session = ort.InferenceSession(self.graph.model_bytes, options, providers=[PROVIDER])

    def _run(self, output, feeds):
        return self.session.run([output], feeds)[0]


class OnnxRuntimeHFPositionIdsAdapter(OnnxRuntimeHFAdapter):
    """The same model exported with a position_ids input instead of the cache, as Optimum's
    GPT-2 decoder graphs take it; the host computes the positions, here past_length + t for
    every row (what Optimum derives from an all-ones attention mask: cumsum(-1) - 1, last T
    kept). Not registered: it judges the graph's Gather on host-made positions, while the
    offset arithmetic is the adapter's own; run it with `gpt2-conformance run --adapter
    gpt2_conformance.backends.thirdparty.onnxruntime_hf.adapter:OnnxRuntimeHFPositionIdsAdapter`."""

    OFFSET = "position_ids"
    WAIVERS = None  # judged raw: its verdicts are in the onnxruntime-hf report's notes, not waived
    capabilities = Capabilities(
        dtypes=tuple(DTYPES),
        devices=("cpu",),
        gradients=False,
        mutable_tables=False,
        black_box="HF GPT2LMHeadModel exported to ONNX with a position_ids input (torch dynamo exporter), "
        "run by onnxruntime CPUExecutionProvider; position_ids = past_length + t from the host",
    )

    def _offset_feeds(self, ids, past_length) -> dict:
        positions = past_length + np.arange(ids.shape[-1], dtype=np.int64)
        return {"position_ids": np.broadcast_to(positions, ids.shape[:1] + positions.shape).copy()}
