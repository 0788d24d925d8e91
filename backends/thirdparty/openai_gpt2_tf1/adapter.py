"""Adapter for OpenAI's own GPT-2 code, `src/model.py` (the file the spec quotes), as gpt-2-simple
ships it (MIT; `gpt_2_simple/src/model.py`, ported to TensorFlow 2's `tf.compat.v1` API), run in
graph mode on the installed TensorFlow. The implementation under test is `model(hparams, X,
past=None, scope='model', reuse=...)` itself, called unchanged: its variables, its gathers, its
`positions_for`, its tied head. Nothing of gpt-2-simple but that module is loaded, from its file
(`model_module()`): the package's `__init__` imports its finetuning code, `gpt_2_simple/gpt_2.py`,
which calls `tf.compat.v1.disable_eager_execution()` at import (L29 in 0.8.1) and so would turn
every TensorFlow adapter in the same process to graph mode; this backend builds its own tf.Graph
and needs none of that.

The graph: one per width n_embd (GPT-2's vocabulary, 1024 positions, GPT-2's head count, one
block: the embedding and the head are the same variables and ops whatever follows them), in
which `model()` is called once per (ids dtype, cache or none) with `reuse` on every call after the
first, so that every call reads the same wte and wpe. X is a placeholder of shape [None, None]
(dynamic batch and length) of the ids' own integer dtype, so ids go to `tf.gather` as the suite
gives them (gpt-2-simple and OpenAI's samplers feed an int32 placeholder, where TF's feed would
narrow int64 ids with numpy's cast; that narrowing is the feed's, not the model's, and is not what
is judged here). A dtype `tf.gather` cannot index with (float ids) is refused by model() itself
when its graph is built: that TypeError is what the suite sees.

Each adapter has its own `tf.compat.v1.Session` on the shared graph: variable values live in the
session, so two adapters never share tables, and the graph is built once per process and width.

What is observed, and how (Capabilities.black_box):

- h: the tensor of model.py's line `h = tf.gather(wte, X) + tf.gather(wpe, positions_for(X,
  past_length))`, found in the graph by its structure (the one add of two gathers that each call of
  model() creates) and fetched by name by `session.run`, as an extra output of the graph. TF runs
  the ops the fetched tensor depends on, which are those of the full forward up to that add: the
  blocks and the head cannot change h, so they are not run for it.
- the cache offset: model() has no past_length argument; it is `tf.shape(past)[-2]`, the length of
  the `past` tensor. The adapter feeds a real past of shape [B, n_layer, 2, n_head, past_length,
  n_embd / n_head] (zeros: h does not read its values), made with numpy, so numpy's rules on a
  size are the first to meet past_length (negative and fractional sizes raise; True is read as 1).
  past_length 0 runs the graph built without a past (past=None, as OpenAI's sample.py runs the
  first step).
- logits: model.py's own tied head, `tf.matmul(h_flat, wte, transpose_b=True)` reshaped to [B, T,
  V]: h_final is fed in place of the head's input (the final LayerNorm's output, which TF lets a
  session feed as any other tensor), with X fed as zeros of h_final's [B, T] (the head's reshape
  reads the batch and length from X).
- init: the graph of that width built under `tf.compat.v1.set_random_seed(seed)`, then the
  variables' own initializers (model.py's `random_normal_initializer(stddev=0.02)` for wte,
  `stddev=0.01` for wpe) run in a new session.
- parameters(): the variables found upstream of h and of the head's weight input in the graph,
  with their shapes (the tied head adds none; an untied head would show its own variable).

Not claimed, and why: float16 and bfloat16 (model.py creates every variable as float32 and has no
dtype parameter); gradients (the API's loss applies the tied head to h itself, but model.py's
head only ever reads the last block's normalised output, so the gradient through "its own head"
would be a head the adapter wires up, not the function's).

The adapter adds no checks: ids and past_length go to the graph as they come. A TensorFlow error
is raised again as the same class with its message as it is, less the Python traceback of the
op's creation that TF 2 appends ("defined at (most recent call last): File ..."), which names
machine-local paths and no part of the error itself.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tensorflow as tf

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables


def model_module():
    """gpt_2_simple/src/model.py as a module of its own, loaded from its file without importing the
    gpt_2_simple package (whose import disables TensorFlow's eager mode for the whole process)."""
    package = importlib.util.find_spec("gpt_2_simple")  # finds the package without running it
    if package is None or not package.submodule_search_locations:
        raise ImportError("gpt-2-simple is not installed (pip install 'gpt2-conformance[openai-gpt2-tf1]')")
    path = Path(next(iter(package.submodule_search_locations))) / "src" / "model.py"
    spec = importlib.util.spec_from_file_location("gpt2_conformance_openai_model", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


openai_model = model_module()
_N_HEAD = {768: 12, 1024: 16, 1280: 20, 1600: 25}  # GPT-2's released head counts
_N_LAYER = 1
_GATHERS = ("ResourceGather", "GatherV2", "Gather")
_VARIABLES = ("VarHandleOp", "VariableV2", "Variable")


def hparams(n_embd: int):
    """GPT-2's hyperparameters at width n_embd, in model.py's own HParams; one block."""
    return openai_model.HParams(
        n_vocab=gpt2.N_VOCAB, n_ctx=gpt2.N_CTX, n_embd=n_embd, n_head=_N_HEAD.get(n_embd, 1), n_layer=_N_LAYER
    )


def upstream_variables(tensor) -> set:
    """The variables (their ops) that `tensor` is computed from."""
    seen, stack, found = set(), [tensor.op], set()
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type in _VARIABLES:
            found.add(op)
        stack.extend(i.op for i in op.inputs)
    return found


def embedding_sum(ops) -> tf.Tensor:
    """The tensor of `tf.gather(wte, X) + tf.gather(wpe, ...)` among the ops one model() call made."""
    adds = [
        op
        for op in ops
        if op.type in ("AddV2", "Add") and len(op.inputs) == 2 and all(i.op.type in _GATHERS for i in op.inputs)
    ]
    if len(adds) != 1:
        raise RuntimeError(f"model() made {len(adds)} additions of two gathers, expected one (h): {adds}")
    return adds[0].outputs[0]


def tied_head(ops):
    """(the head's input: the final norm's output, the head's weight input) of the one transposed
    matmul model() made: `tf.matmul(h_flat, wte, transpose_b=True)` with h_flat = reshape(norm)."""
    heads = [op for op in ops if op.type == "MatMul" and op.get_attr("transpose_b")]
    if len(heads) != 1:
        raise RuntimeError(f"model() made {len(heads)} transposed matmuls, expected one (the head): {heads}")
    h_flat, weight = heads[0].inputs
    if h_flat.op.type != "Reshape":
        raise RuntimeError(f"the head's input is a {h_flat.op.type}, expected the Reshape of h_flat")
    return h_flat.op.inputs[0], weight


@dataclass
class _Call:
    """One call of model() in the graph: its placeholders and the tensors the adapter fetches or feeds."""

    X: tf.Tensor
    past: tf.Tensor | None
    h: tf.Tensor
    head_input: tf.Tensor
    logits: tf.Tensor
    head_weight: tf.Tensor


@dataclass
class _Graph:
    """model()'s graph at one width (and init seed): one call per ids dtype and cache or none."""

    n_embd: int
    seed: int | None
    graph: tf.Graph = field(default_factory=tf.Graph)
    calls: dict = field(default_factory=dict)  # (ids dtype name, has past) -> _Call
    wte: tf.Variable | None = None
    wpe: tf.Variable | None = None

    def __post_init__(self):
        with self.graph.as_default():
            if self.seed is not None:
                tf.compat.v1.set_random_seed(self.seed)
            self.call(np.dtype(np.int32), False)  # the first call creates the variables
            by_name = {v.op.name: v for v in tf.compat.v1.global_variables()}
            self.wte, self.wpe = by_name["model/wte"], by_name["model/wpe"]
            self.rest_init = tf.compat.v1.variables_initializer(
                [v for v in tf.compat.v1.global_variables() if v.op.name not in ("model/wte", "model/wpe")]
            )
            self.all_init = tf.compat.v1.global_variables_initializer()
            # shapeless placeholders: the variables' own assign checks a table's shape
            self.wte_in = tf.compat.v1.placeholder(tf.float32, None)
            self.wpe_in = tf.compat.v1.placeholder(tf.float32, None)
            self.load = tf.group(self.wte.assign(self.wte_in), self.wpe.assign(self.wpe_in))
            self.row_index = tf.compat.v1.placeholder(tf.int64, [])
            self.row_values = tf.compat.v1.placeholder(tf.float32, [self.n_embd])
            self.assign_row = tf.compat.v1.scatter_update(self.wte, self.row_index[None], self.row_values[None])

    def call(self, ids_dtype: np.dtype, with_past: bool) -> _Call:
        key = (ids_dtype.name, with_past)
        if key in self.calls:
            return self.calls[key]
        hp = hparams(self.n_embd)
        with self.graph.as_default():
            before = set(self.graph.get_operations())
            X = tf.compat.v1.placeholder(tf.as_dtype(ids_dtype), [None, None], name=f"X_{ids_dtype.name}")
            past = (
                tf.compat.v1.placeholder(tf.float32, openai_model.past_shape(hparams=hp), name=f"past_{ids_dtype.name}")
                if with_past
                else None
            )
            results = openai_model.model(hparams=hp, X=X, past=past, reuse=bool(self.calls))
            made = [op for op in self.graph.get_operations() if op not in before]
        head_input, head_weight = tied_head(made)
        call = _Call(X, past, embedding_sum(made), head_input, results["logits"], head_weight)
        self.calls[key] = call
        return call


_GRAPHS: dict[tuple[int, int | None], _Graph] = {}


def _graph(n_embd: int, seed: int | None) -> _Graph:
    if (n_embd, seed) not in _GRAPHS:
        _GRAPHS[n_embd, seed] = _Graph(n_embd, seed)
    return _GRAPHS[n_embd, seed]


# TF 2 appends the Python stack of the failing op's creation to an OpError's message
_CREATION_TRACEBACK = re.compile(r"Detected at node [^\n]* defined at \(most recent call last\):\n(?: {2,}[^\n]*\n)*")


def _run(session, fetches, feed):
    try:
        return session.run(fetches, feed)
    except tf.errors.OpError as exc:
        message = _CREATION_TRACEBACK.sub("", exc.message)
        # no op: OpError's str() would append the op's creation stack again
        raise type(exc)(exc.node_def, None, message) from exc


class OpenAIGPT2TF1Adapter(Adapter):
    capabilities = Capabilities(
        dtypes=("float32",),
        devices=("cpu",),
        gradients=False,  # the module docstring says why: model.py's head never reads h itself
        black_box="h = the tensor of model.py's `tf.gather(wte, X) + tf.gather(wpe, positions_for(X, "
        "past_length))`, fetched from the graph by session.run; offset from a fed `past` of past_length "
        "entries; logits = model.py's `tf.matmul(h_flat, wte, transpose_b=True)` with h_final fed as its input",
    )

    @classmethod
    def implementation(cls) -> str:
        from importlib.metadata import version

        return (
            f"OpenAI gpt-2 src/model.py as shipped by gpt-2-simple {version('gpt-2-simple')} "
            f"(tf.compat.v1 graph mode, tensorflow {tf.__version__})"
        )

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.framework_dtype({"float32": tf.float32})
        self.n_embd = config.n_embd
        self._use(_graph(self.n_embd, None))

    def _use(self, g: _Graph) -> None:
        self.g = g
        self.session = tf.compat.v1.Session(graph=g.graph)

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        g = self.g
        _run(self.session, [g.rest_init, g.load], {g.wte_in: wte, g.wpe_in: wpe})

    def tables(self):
        wte, wpe = _run(self.session, [self.g.wte, self.g.wpe], {})
        return wte, wpe

    def init_tables(self, seed):
        self._use(_graph(self.n_embd, seed))
        _run(self.session, self.g.all_init, {})

    def assign_wte_row(self, index, values):
        g = self.g
        _run(self.session, g.assign_row, {g.row_index: index, g.row_values: np.asarray(values, np.float32)})

    def parameters(self):
        call = self.g.call(np.dtype(np.int32), False)
        found = upstream_variables(call.h) | upstream_variables(call.head_weight)
        by_op = {v.op.name: v for v in self.g.graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)}
        return {op.name: tuple(by_op[op.name].shape.as_list()) for op in sorted(found, key=lambda o: o.name)}

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        ids = np.asarray(ids)
        hp = hparams(self.n_embd)
        batch = ids.shape[0] if ids.ndim else 0
        # a real past tensor of past_length (zero) entries: numpy checks the size first
        past = np.zeros(openai_model.past_shape(hparams=hp, batch_size=batch, sequence=past_length), np.float32)
        call = self.g.call(ids.dtype, past.shape[-2] != 0)
        feed = {call.X: ids}
        if call.past is not None:
            feed[call.past] = past
        return _run(self.session, call.h, feed)

    def logits(self, h_final):
        h_final = np.asarray(h_final, np.float32)
        call = self.g.call(np.dtype(np.int32), False)
        feed = {call.head_input: h_final, call.X: np.zeros(h_final.shape[:2], np.int32)}
        return _run(self.session, call.logits, feed)
