"""An exported GPT-2 ONNX file, judged as it is: `gpt2-conformance run --onnx FILE [--engine E]`.

What the suite looks for in the file (analyse(); every miss is a FileError naming it):

- the tables, by shape and by use: a float initializer [50257, d] that a Gather reads (wte) and a
  [1024, d] one that a Gather reads (wpe). By use, not by name: an untied copy of wte that only
  the head reads is not wte.
- the ids: the one integer graph input the token Gather's indices come from.
- h: the Add of the two Gathers' outputs (through Identity/Cast), made a graph output "h".
- the head: a MatMul (or Gemm) onto a float initializer with a 50257 dimension whose output
  reaches a graph output; its activation input becomes a graph input "h_final", so logits(h) is
  the file's own head on the suite's h. Whether the head reads wte itself (tied) is reported; an
  untied head still answers logits, and TIED-LOGITS judges it (its copy keeps the file's values
  when load_tables replaces wte). No head: tied_head is not claimed.
- how positions enter, from the graph inputs the wpe Gather's indices depend on:
  "inside" (none but the ids: the positions are 0..T-1, the file takes no offset), "cache"
  (past key/value inputs [B, n_head, past, head_dim], maybe an attention mask [B, past + T]: the
  file computes the offset from what it is fed), or "position_ids" (an input the caller fills).
  kv_cache is claimed for "cache" only: the suite feeds past_length cache entries (zeros; h does
  not read their values) and an all-ones mask, never positions of its own. A file with a
  position_ids input takes its positions from the caller, so an offset fed there would judge
  the suite's arithmetic, not the file: kv_cache is not claimed and the file is fed 0..T-1.
  A file with cache inputs whose positions ignore them is judged, and fails POSITIONS-OFFSET.

The graph is then cut (cut()): outputs h and logits only, every node neither needs removed (the
blocks, the presents), the tables made external so that each engine gets the suite's tables as
the built-in ONNX backends give theirs (onnx_hf_common). The engines are those backends' own
adapters, given this graph instead of their export (OnnxHFExportAdapter.exported_graph).

Not claimed, with why (NOT_CLAIMED_WHY, shown on the scorecard): init (a file holds tables, not
an initialiser), gradients (an inference graph), mutable_tables (the engines hold the tables as
constants), the dtypes and sizes the file is not, and kv_cache / tied_head as above.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import DTYPES, Capabilities
from gpt2_conformance.backends.files import ENGINE_VARIABLE, FILE_VARIABLE, FileError

ENGINES = ("onnxruntime", "openvino", "tract")
TRANSPARENT = ("Identity", "Cast")  # ops that pass a tensor on without changing which values it holds
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")  # a Gemm head's input may be flattened first
H, H_FINAL, LOGITS = "h", "h_final", "logits"  # the cut graph's names (onnx_hf_common reads "h" and "logits")
INSIDE, CACHE, POSITION_IDS = "inside", "cache", "position_ids"


@dataclass
class Found:
    """What analyse() found in the file, and the cut graph the engines run."""

    path: str
    n_embd: int
    dtype: str  # the tables' type: "float32" or "float16"
    wte: str  # initializer names
    wpe: str
    ids_input: str
    ids_dtype: np.dtype
    h_tensor: str  # the Add's output in the file
    head: str | None  # the head node's name (or op and output), None without a head
    head_weight: str | None  # the initializer the head projects onto
    head_input: str | None  # the tensor cut and fed as h_final
    logits_output: str | None  # the file's output the head's result reaches
    positions: str  # INSIDE, CACHE or POSITION_IDS
    position_input: str | None = None
    cache_inputs: dict[str, tuple[int, int, np.dtype]] = field(default_factory=dict)  # name -> n_head, head_dim, dtype
    mask_inputs: dict[str, np.dtype] = field(default_factory=dict)
    cut_inputs: tuple[str, ...] = ()  # the cut graph's inputs: what is fed
    graph: object = None  # onnxruntime_hf.export.ExportedGraph of the cut graph
    notes: list[str] = field(default_factory=list)

    @property
    def tied(self) -> bool:
        return self.head_weight == self.wte

    def describe(self) -> str:
        """One paragraph: what was found, for the scorecard and the report (implementation)."""
        if self.head is None:
            head = "no head (no MatMul/Gemm onto a [50257, d] table reaches an output)"
        else:
            head = (
                f"head {self.head} onto {self.head_weight!r} ({'tied: wte itself' if self.tied else 'NOT wte: untied'})"
                f", its input {self.head_input!r} fed as h_final, output {self.logits_output!r}"
            )
        if self.positions == CACHE:
            fed = ", ".join([*self.cache_inputs, *self.mask_inputs])
            positions = f"positions from the cache the file is fed ({fed})"
        elif self.positions == POSITION_IDS:
            positions = f"positions from the {self.position_input!r} input (the caller's)"
        else:
            positions = "positions computed inside from the input's length (no cache input)"
        return (
            f"wte {self.wte!r} [{gpt2.N_VOCAB}, {self.n_embd}] and wpe {self.wpe!r} [{gpt2.N_CTX}, {self.n_embd}] "
            f"{self.dtype}, ids {self.ids_input!r} ({self.ids_dtype}), h = {self.h_tensor!r} (the Add of their "
            f"Gathers); {head}; {positions}" + "".join(f"; {n}" for n in self.notes)
        )

    def not_claimed_why(self) -> dict[str, str]:
        why = {
            "init": "a file holds tables, not an initialiser",
            "gradients": "an inference graph has no gradients",
            "mutable_tables": "the engine holds the file's tables as constants: no in-place write reaches them",
        }
        if self.positions == INSIDE:
            why["kv_cache"] = (
                "the file takes no cache: its positions are computed inside from the input's length, "
                "so no offset can be fed to it"
            )
        elif self.positions == POSITION_IDS:
            why["kv_cache"] = (
                f"the file takes its positions from the {self.position_input!r} input: an offset fed there would "
                "judge the suite's arithmetic, not the file's"
            )
        if self.head is None:
            why["tied_head"] = "the file has no head: no MatMul/Gemm onto a [50257, d] table reaches an output"
        for dtype in DTYPES:
            if dtype != self.dtype:
                why[f"dtype:{dtype}"] = f"the file's tables are {self.dtype}"
        for size in gpt2.SIZES.values():
            if size != self.n_embd:
                why[f"size:{size}"] = f"the file is d = {self.n_embd}"
        return why

    def capabilities(self, engine: str) -> Capabilities:
        return Capabilities(
            dtypes=(self.dtype,),
            devices=("cpu",),
            sizes=(self.n_embd,),
            kv_cache=self.positions == CACHE,
            tied_head=self.head is not None,
            init=False,
            gradients=False,
            mutable_tables=False,
            black_box=f"the ONNX file {self.path} run by {engine}: {self.describe()}",
        )


def _fail(path: str, what: str) -> FileError:
    return FileError(path, what)


_FLOAT_TYPES = {1: "float32", 10: "float16", 16: "bfloat16", 11: "float64"}  # onnx.TensorProto element types


def _np_dtype(elem_type: int) -> np.dtype:
    import onnx

    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))


def _dims(value_info) -> list:
    return [
        d.dim_param or (d.dim_value if d.HasField("dim_value") else None) for d in value_info.type.tensor_type.shape.dim
    ]


def load(path: str):
    """The file's ModelProto (external data beside it read in), or a FileError saying why not."""
    import onnx

    if not os.path.exists(path):
        raise _fail(path, "no such file")
    if not os.path.isfile(path):
        raise _fail(path, "not a file")
    try:  # the graph first: a file that is no model is told apart from a model whose data is missing
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, ...
        raise _fail(path, f"not an ONNX model ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not model.graph.node:
        raise _fail(path, "not an ONNX model: it holds no graph nodes")
    missing = _missing_external_data(model, os.path.dirname(os.path.abspath(path)))
    if missing:
        one = len(missing) == 1
        raise _fail(
            path,
            f"its external data file{'' if one else 's'} {', '.join(missing)} {'is' if one else 'are'} missing "
            f"(its tensors are stored there, beside the .onnx): copy {'it' if one else 'them'} beside the model, "
            f"as the export wrote {'it' if one else 'them'}",
        )
    try:
        onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except Exception as exc:  # noqa: BLE001 - a data file cut short, a location outside its folder, ...
        raise _fail(path, f"its external data cannot be read ({type(exc).__name__}: {str(exc)[:200]})") from None
    return model


def _missing_external_data(model, folder: str) -> list[str]:
    """The external data files `model`'s tensors name (relative to `folder`) that are not there."""
    from onnx import TensorProto

    missing: list[str] = []
    for tensor in _tensors(model.graph):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        if location and not os.path.isfile(os.path.join(folder, location)) and location not in missing:
            missing.append(location)
    return missing


def _tensors(graph):
    """Every tensor of a graph: its initializers and its nodes' tensor attributes, subgraphs included."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _tensors(attribute.g)
            for sub in attribute.graphs:
                yield from _tensors(sub)


def analyse(path: str, model=None) -> Found:
    """What the suite needs, found in the file at `path` (module docstring), with the cut graph."""
    model = model if model is not None else load(path)
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    producers = {out: node for node in g.node for out in node.output}
    consumers: dict[str, list] = defaultdict(list)
    for node in g.node:
        for name in node.input:
            consumers[name].append(node)

    def source(name: str) -> str:
        """Back through Identity/Cast to where a tensor's values come from."""
        while name in producers and producers[name].op_type in TRANSPARENT:
            name = producers[name].input[0]
        return name

    def float_table(rows: int) -> list[str]:
        return [n for n, i in inits.items() if len(i.dims) == 2 and i.dims[0] == rows and i.data_type in _FLOAT_TYPES]

    vocab, ctx = float_table(gpt2.N_VOCAB), float_table(gpt2.N_CTX)
    if not vocab or not ctx:
        largest = sorted(inits.values(), key=lambda i: -int(np.prod(i.dims, dtype=np.int64)))[:4]
        listing = ", ".join(f"{i.name} {list(i.dims)}" for i in largest) or "none"
        missing = " and ".join(
            what
            for what, found in (
                (f"no [{gpt2.N_VOCAB}, d] float initializer (GPT-2's wte)", vocab),
                (f"no [{gpt2.N_CTX}, d] float initializer (GPT-2's wpe)", ctx),
            )
            if not found
        )
        raise _fail(path, f"{missing}; its largest initializers: {listing}")
    gathers = [n for n in g.node if n.op_type == "Gather" and all(a.i == 0 for a in n.attribute if a.name == "axis")]
    wte_gathers = [n for n in gathers if source(n.input[0]) in vocab]
    wpe_gathers = [n for n in gathers if source(n.input[0]) in ctx]
    if not wte_gathers or not wpe_gathers:
        which = "[50257, d] table" if not wte_gathers else "[1024, d] table"
        raise _fail(path, f"no Gather (axis 0) reads the {which} ({vocab if not wte_gathers else ctx}): no embedding")
    # h: an Add of a token Gather's output and a position Gather's output
    outputs_of = {n.output[0]: n for n in wte_gathers + wpe_gathers}
    found_add = None
    for node in g.node:
        if node.op_type != "Add":
            continue
        maybe = [outputs_of.get(source(i)) for i in node.input]
        parts = [p for p in maybe if p is not None]
        if len(parts) != len(maybe):
            continue
        tables = {source(p.input[0]) for p in parts}
        if tables & set(vocab) and tables & set(ctx):
            found_add = (node, parts)
            break
    if found_add is None:
        raise _fail(path, "no Add of a token Gather and a position Gather: h = wte[ids] + wpe[positions] not found")
    add, parts = found_add
    wte_gather = next(p for p in parts if source(p.input[0]) in vocab)
    wpe_gather = next(p for p in parts if source(p.input[0]) in ctx)
    wte, wpe = source(wte_gather.input[0]), source(wpe_gather.input[0])
    n_embd = int(inits[wte].dims[1])
    if int(inits[wpe].dims[1]) != n_embd:
        raise _fail(path, f"wte {wte!r} is [.., {n_embd}] but wpe {wpe!r} is {list(inits[wpe].dims)}")
    dtype = _FLOAT_TYPES[inits[wte].data_type]
    if dtype not in ("float32", "float16") or _FLOAT_TYPES[inits[wpe].data_type] != dtype:
        raise _fail(
            path,
            f"tables of type {dtype} and {_FLOAT_TYPES[inits[wpe].data_type]}: the file route judges "
            "float32 or float16 tables (both the same type)",
        )

    graph_inputs = {i.name: i for i in g.input if i.name not in inits}

    def inputs_upstream(names) -> set[str]:
        seen, stack = set(), list(names)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in producers:
                stack.extend(producers[name].input)
        return {n for n in seen if n in graph_inputs}

    ids_sources = inputs_upstream([wte_gather.input[1]])
    if len(ids_sources) != 1:
        raise _fail(path, f"the token Gather's indices come from the inputs {sorted(ids_sources) or 'none'}, not one")
    ids_input = ids_sources.pop()
    ids_dtype = _np_dtype(graph_inputs[ids_input].type.tensor_type.elem_type)

    # the head: MatMul/Gemm onto a float initializer with a 50257 dimension, reaching an output
    graph_outputs = [o.name for o in g.output]
    head = head_weight = head_input = logits_output = None
    for node in g.node:
        if node.op_type not in ("MatMul", "Gemm"):
            continue
        sources = [source(i) for i in node.input[:2]]
        for k, s in enumerate(sources):
            if s in producers and producers[s].op_type == "Transpose":  # MatMul(x, Transpose(W)): F.linear
                s = source(producers[s].input[0])
            if s in inits and gpt2.N_VOCAB in inits[s].dims and inits[s].data_type in _FLOAT_TYPES:
                reached = _downstream_outputs(node, consumers, graph_outputs)
                if reached:
                    head, head_weight = node.name or f"{node.op_type}->{node.output[0]}", s
                    head_input = node.input[1 - k]
                    logits_output = LOGITS if LOGITS in reached else reached[0]
                    break
        if head:
            cut_at = head_input
            while node.op_type == "Gemm" and cut_at in producers and producers[cut_at].op_type in RESHAPES:
                cut_at = producers[cut_at].input[0]
            head_input = cut_at
            break

    # positions
    upstream = inputs_upstream([wpe_gather.input[1]])
    cache_inputs, mask_inputs, position_input = {}, {}, None
    for name, vi in graph_inputs.items():
        if name == ids_input:
            continue
        elem = vi.type.tensor_type.elem_type
        dims = _dims(vi)
        if elem in _FLOAT_TYPES and len(dims) == 4:
            if not (isinstance(dims[1], int) and isinstance(dims[3], int)):
                raise _fail(path, f"the cache input {name!r} {dims} has no fixed n_head and head_dim (dims 1 and 3)")
            cache_inputs[name] = (dims[1], dims[3], _np_dtype(elem))
        elif "mask" in name.lower() and len(dims) == 2:
            mask_inputs[name] = _np_dtype(elem)
        elif name in upstream and elem not in _FLOAT_TYPES and len(dims) == 2:
            position_input = name
    if position_input is not None:
        positions = POSITION_IDS
    elif cache_inputs:
        positions = CACHE
    else:
        positions = INSIDE
    notes = []
    if positions == CACHE and not (upstream & set(cache_inputs) or upstream & set(mask_inputs)):
        notes.append("its positions read neither the cache inputs nor the mask: the offset never reaches wpe")
    if positions == POSITION_IDS and cache_inputs:
        notes.append(f"its cache inputs ({', '.join(cache_inputs)}) do not set the positions")
    found = Found(
        path=path,
        n_embd=n_embd,
        dtype=dtype,
        wte=wte,
        wpe=wpe,
        ids_input=ids_input,
        ids_dtype=ids_dtype,
        h_tensor=add.output[0],
        head=head,
        head_weight=head_weight,
        head_input=head_input,
        logits_output=logits_output,
        positions=positions,
        position_input=position_input,
        cache_inputs=cache_inputs,
        mask_inputs=mask_inputs,
        notes=notes,
    )
    cut(model, found)
    unknown = [
        n for n in found.cut_inputs if n not in (ids_input, H_FINAL, position_input, *cache_inputs, *mask_inputs)
    ]
    if unknown:
        described = ", ".join(f"{n} {_dims(graph_inputs[n])}" for n in unknown)
        raise _fail(
            path,
            f"h or the head needs the input(s) {described}, which are none of what the suite feeds "
            "(ids, position_ids, past key/values, an attention mask)",
        )
    return found


def _downstream_outputs(node, consumers, graph_outputs: list[str]) -> list[str]:
    """The graph outputs `node`'s output reaches, in the graph's order."""
    seen, stack = set(), list(node.output)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for c in consumers.get(name, ()):
            stack.extend(c.output)
    return [o for o in graph_outputs if o in seen]


def _rename(graph, old: str, new: str) -> None:
    """Every use of tensor `old` in the graph becomes `new`."""
    for node in graph.node:
        for seq in (node.input, node.output):
            for k, name in enumerate(seq):
                if name == old:
                    seq[k] = new
    for seq in (graph.input, graph.output, graph.value_info, graph.initializer):
        for item in seq:
            if item.name == old:
                item.name = new


def cut(model, found: Found) -> None:
    """The graph the engines run (module docstring): outputs h and logits, input h_final, nothing
    else; sets found.graph and found.cut_inputs. Changes `model`."""
    import onnx
    from onnx import helper

    from gpt2_conformance.backends.thirdparty.onnxruntime_hf import export

    g = model.graph
    used = {n for node in g.node for n in (*node.input, *node.output)} | {i.name for i in g.input}
    used |= {o.name for o in g.output} | {i.name for i in g.initializer}
    keep_logits = found.logits_output == LOGITS
    for name in (H, H_FINAL, LOGITS):
        if name in used and not (name == LOGITS and keep_logits):
            fresh = name
            while fresh in used:
                fresh += "_file"
            _rename(g, name, fresh)
            used.add(fresh)
            for attr in ("h_tensor", "head_input", "logits_output", "ids_input"):
                if getattr(found, attr) == name:
                    setattr(found, attr, fresh)
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(found.dtype))
    old_outputs = {o.name: o for o in g.output}
    new_outputs = [helper.make_tensor_value_info(H, elem, ["h_batch", "h_seq", found.n_embd])]
    g.node.append(helper.make_node("Identity", [found.h_tensor], [H], name="gpt2c_h"))
    if found.head is not None:
        for node in g.node:  # the head's input becomes h_final wherever it is read
            for k, name in enumerate(node.input):
                if name == found.head_input:
                    node.input[k] = H_FINAL
        g.input.append(helper.make_tensor_value_info(H_FINAL, elem, ["final_batch", "final_seq", found.n_embd]))
        if found.logits_output is not None and found.logits_output != LOGITS:
            g.node.append(helper.make_node("Identity", [found.logits_output], [LOGITS], name="gpt2c_logits"))
            logits_info = onnx.ValueInfoProto()
            logits_info.CopyFrom(old_outputs[found.logits_output])
            logits_info.name = LOGITS
        else:
            logits_info = old_outputs[LOGITS]
        new_outputs.append(logits_info)
    del g.output[:]
    g.output.extend(new_outputs)
    # prune: only what the outputs need
    needed = {o.name for o in g.output}
    kept = []
    for node in reversed(list(g.node)):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(node.input)
    del g.node[:]
    g.node.extend(reversed(kept))
    inits = [i for i in g.initializer if i.name in needed]
    del g.initializer[:]
    g.initializer.extend(inits)
    inputs = [i for i in g.input if i.name in needed]
    del g.input[:]
    g.input.extend(inputs)
    found.cut_inputs = tuple(i.name for i in inputs if i.name not in {x.name for x in inits})
    export.tables_to_external(model, (found.wte, found.wpe))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    n_head, head_dim = next(((h, d) for h, d, _ in found.cache_inputs.values()), (0, 0))
    found.graph = export.ExportedGraph(
        model.SerializeToString(),
        found.wte,
        found.wpe,
        found.tied,
        opset,
        f"the file {found.path}",
        n_head,
        head_dim,
    )


# -- the adapter ----------------------------------------------------------------------------


class FileMixin:
    """Put before an onnx_hf_common engine adapter: that engine, running the file's cut graph."""

    FOUND: Found
    ENGINE: str
    _offset_feeds: Callable[..., dict]  # the engine adapter's (onnx_hf_common.OnnxHFExportAdapter)
    WAIVERS = None  # a user's file has no waivers of ours: --waivers FILE gives them
    NOT_CLAIMED_WHY: dict[str, str] = {}

    def exported_graph(self):
        config = self.config
        if config.n_embd != self.FOUND.n_embd:
            raise ValueError(f"{self.FOUND.path} is d = {self.FOUND.n_embd}, not {config.n_embd}")
        return self.FOUND.graph

    @classmethod
    def implementation(cls) -> str:
        return f"{_engine_description(cls.ENGINE)} running the ONNX file {cls.FOUND.path} ({_digest(cls.FOUND.path)})"

    def init_tables(self, seed):
        raise NotImplementedError("init_tables is not claimed: " + self.NOT_CLAIMED_WHY["init"])

    @classmethod
    def file_tables(cls) -> tuple[np.ndarray, np.ndarray]:
        """The file's own (wte, wpe) as float32, read from the file (for the check against the
        golden data: conformance/run/files.py)."""
        from onnx import numpy_helper

        model = load(cls.FOUND.path)
        inits = {i.name: i for i in model.graph.initializer}
        wte, wpe = (numpy_helper.to_array(inits[n]).astype(np.float32) for n in (cls.FOUND.wte, cls.FOUND.wpe))
        return wte, wpe

    def parameters(self):
        """The cut graph's float initializers of more than one value: wte, wpe and an untied head's
        own matrix or a head bias where the file has one."""
        import onnx

        model = onnx.load_from_string(self.FOUND.graph.model_bytes)
        return {
            i.name: tuple(i.dims)
            for i in model.graph.initializer
            if i.data_type in _FLOAT_TYPES and int(np.prod(i.dims, dtype=np.int64)) > 1
        }

    def _feeds(self, ids, past_length, h_final) -> dict:
        """The cut graph's inputs: the ids as given, the cache inputs of length past_length (zeros:
        np.zeros refuses a negative, fractional or bool length, as for the built-in ONNX backends),
        an all-ones mask of past_length + T, position ids 0..T-1 (kv_cache is never claimed for
        them), h_final."""
        found = self.FOUND
        batch = ids.shape[0] if len(ids.shape) >= 1 else 1
        seq = ids.shape[-1] if len(ids.shape) >= 1 else 0
        feeds = {found.ids_input: ids, H_FINAL: h_final}
        if found.cache_inputs:  # the engine's own limit on a cache (tract copies every input: tract_hf/adapter.py)
            self._offset_feeds(ids, past_length)
        for name, (n_head, head_dim, dtype) in found.cache_inputs.items():
            feeds[name] = np.zeros((batch, n_head, past_length, head_dim), dtype)
        for name, dtype in found.mask_inputs.items():
            feeds[name] = np.ones((batch, past_length + seq), dtype)
        if found.position_input is not None:
            positions = past_length + np.arange(seq, dtype=np.int64)
            feeds[found.position_input] = np.broadcast_to(positions, (batch, seq)).copy()
        return {name: feeds[name] for name in found.cut_inputs}

    def logits(self, h_final):
        from gpt2_conformance.backends.thirdparty.onnx_hf_common import to_model_dtype

        h = to_model_dtype(h_final, self.FOUND.dtype)
        run = self._run
        return run(LOGITS, self._feeds(np.zeros((1, 0), self.FOUND.ids_dtype), 0, h))


def _engine_description(engine: str) -> str:
    if engine == "onnxruntime":
        import onnxruntime

        return f"onnxruntime {onnxruntime.__version__} CPUExecutionProvider"
    if engine == "openvino":
        import openvino

        return f"OpenVINO {openvino.get_version()} CPU plugin (INFERENCE_PRECISION_HINT f32)"
    import tract

    return f"tract {tract.version()} (default CPU runtime)"


def _digest(path: str) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return f"sha256 {sha.hexdigest()[:16]}"


def engine_adapter(engine: str):
    """The built-in backend adapter class that runs an ONNX graph on `engine`."""
    if engine not in ENGINES:
        raise ValueError(f"--engine {engine!r} is not one of {', '.join(ENGINES)}")
    try:
        if engine == "onnxruntime":
            from gpt2_conformance.backends.thirdparty.onnxruntime_hf.adapter import OnnxRuntimeHFAdapter

            return OnnxRuntimeHFAdapter
        if engine == "openvino":
            from gpt2_conformance.backends.thirdparty.openvino_hf.adapter import OpenVINOHFAdapter

            return OpenVINOHFAdapter
        from gpt2_conformance.backends.thirdparty.tract_hf.adapter import TractHFAdapter

        return TractHFAdapter
    except ImportError as exc:
        extra = {"onnxruntime": "onnx", "openvino": "openvino", "tract": "tract"}[engine]
        raise ImportError(
            f"--engine {engine} needs {exc.name or exc}, which is not installed: "
            f"pip install 'gpt2-conformance[{extra}]'"
        ) from None


def adapter_for(path: str, engine: str = "onnxruntime") -> type:
    """An adapter class judging the ONNX file at `path` on `engine`, its claims the file's."""
    path = os.path.abspath(path)
    base = engine_adapter(engine)
    found = analyse(path)
    return type(
        f"OnnxFile{base.__name__}",
        (FileMixin, base),
        {
            "FOUND": found,
            "ENGINE": engine,
            "capabilities": found.capabilities(engine),
            "NOT_CLAIMED_WHY": found.not_claimed_why(),
            "__module__": __name__,
        },
    )


def __getattr__(name: str):
    """FileAdapter: the adapter for the file the environment names (backends/files/__init__.py)."""
    if name != "FileAdapter":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    path = os.environ.get(FILE_VARIABLE)
    if not path:
        raise ValueError(f"{__name__}:FileAdapter needs the file in {FILE_VARIABLE} (gpt2-conformance run --onnx FILE)")
    made = adapter_for(path, os.environ.get(ENGINE_VARIABLE) or "onnxruntime")
    globals()["FileAdapter"] = made
    return made
