"""Export Hugging Face's GPT2LMHeadModel to ONNX, the graph the ONNX Runtime backend runs.

The exported module is HF's own forward (no reimplementation): `GPT2Model.forward` given the
ids and a real DynamicCache holding past_length key/value entries, read out as
hidden_states[0] (the input of block 0: wte(ids) + wpe(positions) after dropout, identity in
eval), and the model's own `lm_head` (tied to wte by tie_weights) on a given h_final. The
exporter is torch's (torch.export, dynamo=True, with onnxscript's optimizer), which prunes
block 0 since no output depends on it. The cache offset is a graph input: past_key/past_value
[B, n_head, past, head_dim] with `past` a dynamic dimension, which is how HF/Optimum decoder
graphs carry the cache; GPT2Model reads past_length as cache.get_seq_length(), the key's
length, and the exporter turns that into Shape(past_key)[2] -> Range -> Add -> Gather(wpe).

The exported tables are stored as *external data* in the cached ModelProto, so that each
session can be created from the same 16 KB graph with the suite's tables supplied through
SessionOptions.add_external_initializers (ORT injects them before its graph optimizations:
SessionOptions.add_initializer instead shares a buffer that the constant folder does not see,
and the head would read the file's tables; see adapter.py).

offset="position_ids" exports the same model with a position_ids input instead of the cache, as
Optimum's GPT-2 decoder graphs take it (the host computes the positions).

An export is the slow part, so one graph is kept per (n_embd, dtype, offset) in this process, and on
disk for the next process (a suite run restarts its child after each process abort: tract's
panics): in a folder of this user's own under the temporary directory, keyed by everything the
graph depends on (sizes, dtype, offset, opset, the HF config, the torch, transformers, onnx and
onnxscript versions, and the source of this file and of gpt2_config's), so a graph is never
read back for another setup. A process that finds its graph on disk imports neither torch nor
transformers (most of such a process's start): only an export, or HF's own init, needs them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import io
import json
import os
import warnings
from dataclasses import dataclass
from importlib.metadata import version

from gpt2_conformance.api import gpt2, machine

OPSET = 20  # torch 2.13's default (torch/onnx/_constants.py ONNX_DEFAULT_OPSET), pinned so the report can name it
INPUTS = ("input_ids", "past_key", "past_value", "h_final")
POSITION_IDS_INPUTS = ("input_ids", "position_ids", "h_final")  # the offset="position_ids" graph
OUTPUTS = ("h", "logits")
CONFIG_MODULE = "gpt2_conformance.backends.thirdparty.hf_transformers.adapter"  # its gpt2_config: the model exported
_CACHE: dict[tuple[int, str, str], ExportedGraph] = {}


@dataclass(frozen=True)
class ExportedGraph:
    """One exported graph, its tables as external data, and what produced it."""

    model_bytes: bytes  # ModelProto with wte and wpe as external data (no payload)
    wte_name: str  # the initializer both the token Gather and the head read (the tie)
    wpe_name: str
    head_uses_wte: bool  # whether the head's MatMul reads wte_name (through a Transpose)
    opset: int
    exporter: str  # e.g. "torch 2.13.0+cpu torch.onnx.export(dynamo=True), onnxscript 0.7.2"
    n_head: int
    head_dim: int


def module(model, offset: str = "cache"):
    """The torch module export() exports for `offset`, around a GPT2LMHeadModel (imports torch and
    transformers, which only an export needs)."""
    import torch
    from transformers import DynamicCache

    class EmbedAndHead(torch.nn.Module):
        """(input_ids, past_key, past_value, h_final) -> (h, logits) through GPT2LMHeadModel's own code."""

        def __init__(self, model):
            super().__init__()
            self.lm = model

        def forward(self, input_ids, past_key, past_value, h_final):
            cache = DynamicCache(config=self.lm.config)
            layer = cache.layers[0]
            # what DynamicLayer.update does on its first call, without its torch.cat copy
            layer.lazy_initialization(past_key, past_value)
            layer.keys, layer.values = past_key, past_value
            out = self.lm.transformer(input_ids=input_ids, cache=cache, use_cache=True, output_hidden_states=True)
            return out.hidden_states[0], self.lm.lm_head(h_final)

    class EmbedAndHeadPositionIds(torch.nn.Module):
        """(input_ids, position_ids, h_final) -> (h, logits): the positions come from the host, as in
        Optimum's ONNX decoder graphs, and GPT2Model uses them as given (wpe(position_ids))."""

        def __init__(self, model):
            super().__init__()
            self.lm = model

        def forward(self, input_ids, position_ids, h_final):
            out = self.lm.transformer(
                input_ids=input_ids, position_ids=position_ids, use_cache=False, output_hidden_states=True
            )
            return out.hidden_states[0], self.lm.lm_head(h_final)

    if offset == "cache":
        return EmbedAndHead(model)
    if offset == "position_ids":
        return EmbedAndHeadPositionIds(model)
    raise ValueError(f"export: offset {offset!r} is not 'cache' or 'position_ids'")


def tables_to_external(model, names: tuple[str, ...]) -> None:
    """Drop the payload of `names` and mark them external: the session gets them from memory (also
    the file route's, backends/files/onnx_file.py)."""
    import onnx

    for init in model.graph.initializer:
        if init.name in names:
            for field in ("raw_data", "float_data", "int32_data"):  # float32 / float16, bfloat16
                init.ClearField(field)
            init.data_location = onnx.TensorProto.EXTERNAL
            del init.external_data[:]
            entry = init.external_data.add()
            entry.key, entry.value = "location", f"{init.name}.bin"  # never read: injected instead


def _find_tables(model, n_embd: int) -> tuple[str, str, bool]:
    """(wte initializer, wpe initializer, whether the head reads wte) from the graph's structure."""
    shapes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    vocab = [n for n, s in shapes.items() if s == (gpt2.N_VOCAB, n_embd)]
    ctx = [n for n, s in shapes.items() if s == (gpt2.N_CTX, n_embd)]
    if len(vocab) != 1 or len(ctx) != 1:
        raise RuntimeError(
            f"exported graph: expected one [{gpt2.N_VOCAB}, {n_embd}] and one [{gpt2.N_CTX}, "
            f"{n_embd}] initializer, found {vocab} and {ctx}"
        )
    producers = {out: node for node in model.graph.node for out in node.output}
    head = producers["logits"]
    head_inputs = set(head.input)
    for name in head.input:  # MatMul(h_final, Transpose(wte)) as the exporter writes F.linear
        if name in producers and producers[name].op_type == "Transpose":
            head_inputs |= set(producers[name].input)
    return vocab[0], ctx[0], vocab[0] in head_inputs


def _disk_key(n_embd: int, dtype: str, offset: str) -> str:
    """Everything the graph depends on, without importing what made it: the HF config is
    gpt2_config(n_embd) of the installed transformers, so its source and that version stand for it."""
    spec = importlib.util.find_spec(CONFIG_MODULE)  # found, not imported (it imports torch)
    assert spec is not None and spec.origin is not None  # a module of this package
    config_source = spec.origin
    sources = [open(path, "rb").read() for path in (__file__, config_source)]
    what = {
        "n_embd": n_embd,
        "dtype": dtype,
        "offset": offset,
        "opset": OPSET,
        "sources": [hashlib.sha256(src).hexdigest() for src in sources],
        "versions": [version(p) for p in ("torch", "transformers", "onnx", "onnxscript")],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _read_disk(folder: str, key: str) -> ExportedGraph | None:
    """One file per graph: a line of JSON (the fields), then the ModelProto's bytes."""
    try:
        with open(os.path.join(folder, key + ".graph"), "rb") as f:
            fields = json.loads(f.readline())
            return ExportedGraph(model_bytes=f.read(), **fields)
    except (OSError, ValueError, TypeError):
        return None


def _write_disk(folder: str, key: str, graph: ExportedGraph) -> None:
    fields = {k: v for k, v in dataclasses.asdict(graph).items() if k != "model_bytes"}
    content = json.dumps(fields).encode() + b"\n" + graph.model_bytes
    # refused (a full disk): the next process exports again
    machine.replace_atomically(os.path.join(folder, key + ".graph"), lambda f: f.write(content))


def export(n_embd: int, dtype: str, offset: str = "cache") -> ExportedGraph:
    """The graph of GPT2LMHeadModel(gpt2_config(n_embd)) in `dtype` ("float32", "float16",
    "bfloat16"), exported on first use and then kept for this process and on disk (module
    docstring). offset="cache": past_key/past_value inputs; offset="position_ids": a
    position_ids input."""
    if offset not in ("cache", "position_ids"):
        raise ValueError(f"export: offset {offset!r} is not 'cache' or 'position_ids'")
    key = (n_embd, dtype, offset)
    if key in _CACHE:
        return _CACHE[key]
    folder = machine.private_cache_folder("onnx-export")
    disk_key = _disk_key(n_embd, dtype, offset) if folder else ""
    graph = _read_disk(folder, disk_key) if folder else None
    if graph is None:
        graph = _export(n_embd, dtype, offset)
        if folder:
            _write_disk(folder, disk_key, graph)
    _CACHE[key] = graph
    return graph


def _export(n_embd: int, dtype_name: str, offset: str) -> ExportedGraph:
    import onnxscript
    import torch
    from transformers import GPT2LMHeadModel
    from transformers import initialization as hf_init

    from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config

    dtype, hf_config = getattr(torch, dtype_name), gpt2_config(n_embd)
    with hf_init.no_init_weights():  # the tables are replaced in every session: skip the init
        model = GPT2LMHeadModel(hf_config)
    model.tie_weights()
    model = model.to(dtype).eval()
    n_head, head_dim = hf_config.n_head, n_embd // hf_config.n_head
    batch, seq, past = 2, 5, 3  # sizes of 0 or 1 would be specialised by torch.export
    example: tuple[torch.Tensor, ...] = (
        torch.zeros(batch, seq, dtype=torch.int64),
        torch.zeros(batch, n_head, past, head_dim, dtype=dtype),
        torch.zeros(batch, n_head, past, head_dim, dtype=dtype),
        torch.zeros(batch, seq, n_embd, dtype=dtype),
    )
    dim = torch.export.Dim
    b, t, p = dim("batch"), dim("seq", min=0), dim("past", min=0)
    hb, ht = dim("h_batch"), dim("h_seq", min=0)
    dynamic = {
        "input_ids": {0: b, 1: t},
        "past_key": {0: b, 2: p},
        "past_value": {0: b, 2: p},
        "h_final": {0: hb, 1: ht},
    }
    names: tuple[str, ...] = INPUTS
    if offset == "position_ids":
        example = (example[0], torch.arange(seq).expand(batch, seq).contiguous(), example[3])
        dynamic = {"input_ids": {0: b, 1: t}, "position_ids": {0: b, 1: t}, "h_final": {0: hb, 1: ht}}
        names = POSITION_IDS_INPUTS
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # the exporter's progress lines and deprecation notes
        program = torch.onnx.export(
            module(model, offset),
            example,
            dynamo=True,
            dynamic_shapes=dynamic,
            opset_version=OPSET,
            input_names=list(names),
            output_names=list(OUTPUTS),
        )
    assert program is not None  # dynamo=True returns the ONNXProgram (None only from the old exporter)
    proto = program.model_proto
    wte_name, wpe_name, head_uses_wte = _find_tables(proto, n_embd)
    tables_to_external(proto, (wte_name, wpe_name))
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    exporter = f"torch {torch.__version__} torch.onnx.export(dynamo=True), onnxscript {onnxscript.__version__}"
    return ExportedGraph(
        proto.SerializeToString(), wte_name, wpe_name, head_uses_wte, opset, exporter, n_head, head_dim
    )
