"""The glue shared by the backends that run the one ONNX graph exported from Hugging Face's
GPT2LMHeadModel (onnxruntime_hf/export.py) on an ONNX engine: onnxruntime-hf (ONNX Runtime),
openvino-hf (OpenVINO) and tract-hf (tract). One export, several engines, so the reports show
where the engines, not the model, differ.

OnnxHFExportAdapter owns what is the same on every engine: the export (one graph per n_embd,
dtype and offset kind, kept for the process), the tables in the model's dtype, HF's own init,
parameters() (the graph's float initializers), the cache feeds whose length is the offset, and
the two calls: embed reads the graph's "h" output, logits its "logits" output on an h_final
input. A subclass gives the engine: `_start(wte, wpe)` builds a runnable graph holding the
tables, `_run(output, feeds)` runs it and returns that output as numpy. The adapter adds no
checks of its own: what an engine does with bad input is the engine's verdict.

Engines that read an ONNX file (OpenVINO's and tract's ONNX frontends) get the graph as it is
deployed: model.onnx with wte and wpe as external data files beside it (`write_model`), the
layout the export already describes (each table's location is "<initializer name>.bin").

Only the adapters of these backends import this module; the suite (conformance/) never imports
it. torch and transformers are imported where they are used (an export, HF's init, float16
rounding), not here: a process whose graph is already on disk (export.py) runs without them,
which matters most to tract-hf, whose every panic restarts the suite's process.
"""

from __future__ import annotations

import abc
import os
from importlib.metadata import version

import numpy as np

from gpt2_conformance.api.adapter import Adapter, AdapterConfig
from gpt2_conformance.api.validation import check_tables
from gpt2_conformance.backends.thirdparty.onnxruntime_hf import export

# model dtype -> the numpy dtype its arrays are held in
DTYPES = {"float32": np.float32, "float16": np.float16}
MODEL_FILE = "model.onnx"


def to_model_dtype(array: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values rounded as torch's .to(dtype) rounds them (what model.to(dtype) stores); in
    float32 that is the values themselves."""
    if dtype == "float32":
        return np.ascontiguousarray(array).astype(np.float32, copy=False)
    import torch

    from gpt2_conformance.backends.thirdparty.torch_blackbox import from_numpy

    tensor = from_numpy(np.ascontiguousarray(array)).to(getattr(torch, dtype))
    return tensor.numpy().astype(DTYPES[dtype], copy=False)


def exported_by() -> str:
    """What made the graph, for implementation(): model, exporter, opset."""
    return (
        f"transformers {version('transformers')} GPT2LMHeadModel exported by torch {version('torch')} "
        f"torch.onnx.export(dynamo=True, onnxscript {version('onnxscript')}), ONNX opset {export.OPSET}, "
        f"onnx {version('onnx')}"
    )


def write_model(
    graph: export.ExportedGraph, wte: np.ndarray, wpe: np.ndarray, folder: str, outputs: tuple[str, ...] = ()
) -> str:
    """model.onnx in `folder` with wte and wpe as its external data files; the model's path.
    `outputs`: also write <output>.onnx for each, the same graph with that one output (the
    nodes only the others read are then dead; the engine prunes them), beside the same tables."""
    for name, table in ((graph.wte_name, wte), (graph.wpe_name, wpe)):
        np.ascontiguousarray(table).tofile(os.path.join(folder, f"{name}.bin"))  # raw little-endian, as ONNX stores it
    path = os.path.join(folder, MODEL_FILE)
    with open(path, "wb") as f:
        f.write(graph.model_bytes)
    if outputs:
        import onnx

        for output in outputs:
            model = onnx.load_from_string(graph.model_bytes)
            keep = [o for o in model.graph.output if o.name == output]
            if not keep:
                raise ValueError(f"write_model: the graph has no output {output!r}")
            del model.graph.output[:]
            model.graph.output.extend(keep)
            with open(os.path.join(folder, f"{output}.onnx"), "wb") as f:
                f.write(model.SerializeToString())
    return path


class OnnxHFExportAdapter(Adapter):
    """An Adapter around one engine running the exported graph (see the module docstring)."""

    OFFSET = "cache"  # the graph's offset input (export.py)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        name = type(self).__name__
        if config.dtype not in self.capabilities.dtypes:
            raise ValueError(f"{name}: dtype {config.dtype!r} is not one of {self.capabilities.dtypes}")
        if config.device not in self.capabilities.devices:
            raise ValueError(f"{name}: device {config.device!r} is not one of {self.capabilities.devices}")
        self.np_dtype = DTYPES[config.dtype]
        self.graph = self.exported_graph()
        # set by _set_tables, which load_tables / init_tables always call first
        self._wte: np.ndarray | None = None
        self._wpe: np.ndarray | None = None

    def exported_graph(self) -> export.ExportedGraph:
        """The graph the engine runs: HF's model exported for this config (the file route,
        backends/files/onnx_file.py, gives a user's file here instead)."""
        return export.export(self.config.n_embd, self.config.dtype, self.OFFSET)

    # -- the engine ---------------------------------------------------------------
    @abc.abstractmethod
    def _start(self, wte: np.ndarray, wpe: np.ndarray) -> None:
        """Build the engine's runnable graph holding (wte, wpe), already in the model dtype."""

    @abc.abstractmethod
    def _run(self, output: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The graph's output `output` ("h" or "logits") for these inputs, as numpy."""

    # -- tables -------------------------------------------------------------------
    def _set_tables(self, wte: np.ndarray, wpe: np.ndarray) -> None:
        self._start(wte, wpe)
        self._wte, self._wpe = wte, wpe

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        dtype = self.config.dtype
        self._set_tables(to_model_dtype(wte, dtype).copy(), to_model_dtype(wpe, dtype).copy())

    def tables(self):
        """The arrays handed to the engine (in the model's dtype): the engines offer no read-back."""
        return self._wte.copy(), self._wpe.copy()

    def init_tables(self, seed):
        """HF's own init (torch.manual_seed, then GPT2LMHeadModel: post_init -> _init_weights,
        tie_weights): the tables an export of that model would hold."""
        import torch
        from transformers import GPT2LMHeadModel

        from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config

        torch.manual_seed(seed)
        model = GPT2LMHeadModel(gpt2_config(self.config.n_embd)).to(getattr(torch, self.config.dtype))
        wte, wpe = (p.detach().numpy().copy() for p in (model.transformer.wte.weight, model.transformer.wpe.weight))
        self._set_tables(wte, wpe)

    def parameters(self):
        """The graph's float initializers: everything the embedding and the head read."""
        import onnx

        floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
        model = onnx.load_from_string(self.graph.model_bytes)
        return {i.name: tuple(i.dims) for i in model.graph.initializer if i.data_type in floats}

    # -- forward ------------------------------------------------------------------
    def _offset_feeds(self, ids, past_length) -> dict:
        """The cache inputs, all zeros, of length past_length: the graph's offset. np.zeros never
        touches their pages (the graph reads only their shape) and rejects negative, fractional
        and bool lengths itself."""
        cache = np.zeros((ids.shape[0], self.graph.n_head, past_length, self.graph.head_dim), self.np_dtype)
        return {"past_key": cache, "past_value": cache}

    def _feeds(self, ids, past_length, h_final) -> dict:
        return {"input_ids": ids, "h_final": h_final, **self._offset_feeds(ids, past_length)}

    def embed(self, ids, past_length=0):
        if not hasattr(ids, "shape") or not hasattr(ids, "dtype"):
            raise TypeError(f"{type(self).__name__}.embed: ids must be an array, got {type(ids).__name__}")
        if len(ids.shape) < 1:
            raise ValueError(f"{type(self).__name__}.embed: ids must be [B, T], got a 0-d array")
        no_h = np.zeros((1, 0, self.config.n_embd), self.np_dtype)  # the head's input, unused here
        return self._run("h", self._feeds(ids, past_length, no_h))

    def logits(self, h_final):
        h = to_model_dtype(h_final, self.config.dtype)
        return self._run("logits", self._feeds(np.zeros((1, 0), np.int64), 0, h))
