"""Adapter for Apache TVM (Relax) running Hugging Face's GPT2LMHeadModel: the model
hf-transformers judges eager, here as torch.export captures it, TVM's Relax frontend
(`tvm.relax.frontend.torch.from_exported_program`) imports it and `tvm.compile` builds it for
target "llvm"; the Relax VM runs it. What is judged is TVM's code: the frontend lowers
aten.embedding to `R.take(table, ids, axis=0, mode="fast")`, whose TIR reads the table at the
index as given, with no bounds check, so its answers to bad indices are TVM's.

What is observed, and how (Capabilities.black_box):

- the graph: torch.export of the same module the ONNX backends export
  (onnxruntime_hf/export.py `module`: GPT2Model.forward given the ids and a real DynamicCache
  made of past_key/past_value inputs, read out as hidden_states[0], and the model's own tied
  lm_head on an h_final input). Batch, length, cache length and the head's input are dynamic
  dimensions, kept symbolic by the frontend: one compiled library per width and dtype serves
  every shape. Block 0 is dead code for both outputs and is pruned before the import (the
  ONNX exporter prunes it too); the frontend cannot import its attention (a boolean mask) and
  nothing observed depends on it.
- h: the graph's first output, hidden_states[0] = wte(ids) + wpe(past + t).
- the cache offset: past_key/past_value of length past_length; the graph reads only their shape
  (Shape -> arange -> add -> take(wpe)). They are allocated with `tvm.runtime.empty`, never
  filled, so a long cache costs address space, not memory.
- logits: the graph's second output, `lm_head(h_final)` = matmul(h_final, permute(wte)), fused by
  TVM's FuseTransposeMatmul into one kernel that reads wte in place (unfused, every call, embed's
  included, copied wte's transpose first).
- the tables: the tie is one function parameter (torch.export names it lm_head.weight) read by
  the token gather and by the head; it and wpe stay parameters of the compiled function
  (keep_params_as_input), every other weight is bound as a constant and eliminated with the
  dead block. The adapter holds each table as one TVM tensor and passes it to every call;
  assign_wte_row writes a row of that tensor in place (through a DLPack view), so the gather
  and the head read the same write. tables() reads the TVM tensors back.
- init: torch.manual_seed(seed) then GPT2LMHeadModel(config): HF's own init (hf-transformers').
- dtypes: float32 only. gradients: not claimed (a Relax inference graph; TVM's Relax gradient
  pass is not a deployment path and the frontend exports no backward).

The compiled library is written with `export_library` into the backend's cache folder
($GPT2C_TVM_CACHE, set by the registry entry's child_env, else this user's private cache folder),
keyed by the width, dtype, the TVM / torch / transformers versions and this file's source, so
the suite's processes load it instead of exporting and compiling again.

The adapter adds no checks: ids go to the VM as a tensor of their own dtype and shape (the VM
checks rank and dtype against the function's signature), past_length becomes the cache's
length through np.zeros's checks of a dimension (negative and fractional lengths are refused there,
as in the ONNX backends) and then tvm.runtime.empty.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import warnings
from importlib.metadata import version

import numpy as np
import tvm
from tvm import relax

from gpt2_conformance.api import gpt2, machine
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables

DTYPES = {"float32": np.float32}
CACHE_ENV = "GPT2C_TVM_CACHE"
TARGET = "llvm"
INPUTS = 4  # input_ids, past_key, past_value, h_final; then the tables


def _cache_folder() -> str | None:
    folder = os.environ.get(CACHE_ENV)
    if folder and os.path.isdir(folder):
        return folder
    return machine.private_cache_folder("tvm-relax-hf-cache")


def _key(n_embd: int, dtype: str) -> str:
    what = {
        "n_embd": n_embd,
        "dtype": dtype,
        "target": TARGET,
        "source": hashlib.sha256(open(__file__, "rb").read()).hexdigest(),
        "versions": [version(p) for p in ("apache-tvm", "torch", "transformers")],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _compile(n_embd: int, dtype_name: str):
    """(the compiled Relax executable, the torch names of its table parameters in order, n_head)."""
    import torch
    from transformers import GPT2LMHeadModel
    from transformers import initialization as hf_init
    from tvm.relax.frontend import detach_params
    from tvm.relax.frontend.torch import from_exported_program

    from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config
    from gpt2_conformance.backends.thirdparty.onnxruntime_hf import export

    dtype, hf_config = getattr(torch, dtype_name), gpt2_config(n_embd)
    with hf_init.no_init_weights():  # the tables are inputs of every call: skip the init
        model = GPT2LMHeadModel(hf_config)
    model.tie_weights()
    model = model.to(dtype).eval()
    n_head = hf_config.n_head
    head_dim = n_embd // n_head
    batch, seq, past = 2, 5, 3  # sizes of 0 or 1 would be specialised by torch.export
    example = (
        torch.zeros(batch, seq, dtype=torch.int64),
        torch.zeros(batch, n_head, past, head_dim, dtype=dtype),
        torch.zeros(batch, n_head, past, head_dim, dtype=dtype),
        torch.zeros(batch, seq, n_embd, dtype=dtype),
    )
    dim = torch.export.Dim
    b, t, p = dim("batch"), dim("seq", min=0), dim("past", min=0)
    dynamic = {
        "input_ids": {0: b, 1: t},
        "past_key": {0: b, 2: p},
        "past_value": {0: b, 2: p},
        "h_final": {0: dim("h_batch"), 1: dim("h_seq", min=0)},
    }
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        program = torch.export.export(export.module(model, "cache"), example, dynamic_shapes=dynamic)
    # block 0 feeds neither output; its dropouts count as impure for FX's default, so name the pure
    graph = program.graph_module.graph
    graph.eliminate_dead_code(is_impure_node=lambda node: node.op in ("placeholder", "output"))
    program.graph_module.recompile()
    targets = {spec.arg.name: spec.target for spec in program.graph_signature.input_specs if spec.target is not None}
    ir = from_exported_program(program, keep_params_as_input=True, run_ep_decomposition=False)
    ir, params = detach_params(ir)
    names = [str(v.name) for v in ir["main"].params][INPUTS:]
    tables = [n for n in names if targets[n] in ("lm.lm_head.weight", "lm.transformer.wpe.weight")]
    bound = {n: value for n, value in zip(names, params["main"], strict=True) if n not in tables}
    ir = relax.transform.BindParams("main", bound)(ir)
    ir = relax.transform.DeadCodeElimination()(ir)
    # the head is matmul(h_final, permute_dims(wte)); compiled as written, every call (embed's
    # included, its h_final empty) materialises wte's 50257 x d transpose first, a cost per call
    # that no input shrinks. TVM's own pass fuses the two into one kernel reading wte in place.
    ir = relax.transform.FuseTransposeMatmul()(ir)
    kept = [str(v.name) for v in ir["main"].params][INPUTS:]
    if kept != tables or len(kept) != 2:
        raise RuntimeError(f"tvm-relax-hf: the compiled function's tables are {kept}, expected {tables}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        executable = tvm.compile(ir, target=TARGET)
    return executable, [targets[n] for n in kept], n_head


def build(n_embd: int, dtype: str) -> tuple[relax.VirtualMachine, list[str], int]:
    """The Relax VM of the compiled graph for (n_embd, dtype), its table parameters' torch names
    (in the function's order), and n_head; compiled once and then loaded from the cache folder."""
    folder = _cache_folder()
    key = _key(n_embd, dtype)
    library = os.path.join(folder, key + ".so") if folder else ""
    meta = os.path.join(folder, key + ".json") if folder else ""
    if not (folder and os.path.exists(library) and os.path.exists(meta)):
        executable, names, n_head = _compile(n_embd, dtype)
        if folder:
            partial = f"{library}.{os.getpid()}.so"
            executable.export_library(partial)
            os.replace(partial, library)
            content = json.dumps({"tables": names, "n_head": n_head}).encode()
            machine.replace_atomically(meta, lambda f: f.write(content))
        else:
            return relax.VirtualMachine(executable, tvm.cpu()), names, n_head
    with open(meta) as f:
        fields = json.load(f)
    return relax.VirtualMachine(tvm.runtime.load_module(library), tvm.cpu()), fields["tables"], fields["n_head"]


class TvmRelaxHFAdapter(Adapter):
    capabilities = Capabilities(
        dtypes=tuple(DTYPES),
        devices=("cpu",),
        gradients=False,
        black_box="HF GPT2LMHeadModel through torch.export -> TVM Relax, tvm.compile (llvm), Relax VM; "
        "h = hidden_states[0] output; offset = length of the past_key/past_value inputs; "
        "logits = the compiled lm_head on an h_final input",
    )

    @classmethod
    def implementation(cls) -> str:
        return (
            f"apache-tvm {version('apache-tvm')} Relax ({TARGET}, Relax VM) compiling transformers "
            f"{version('transformers')} GPT2LMHeadModel exported by torch {version('torch')} torch.export"
        )

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        name = type(self).__name__
        if config.dtype not in DTYPES:
            raise ValueError(f"{name}: dtype {config.dtype!r} is not one of {tuple(DTYPES)}")
        if config.device != "cpu":
            raise ValueError(f"{name}: device {config.device!r}: only cpu is claimed")
        self.np_dtype = DTYPES[config.dtype]
        self.vm, self.table_names, self.n_head = build(config.n_embd, config.dtype)
        self.head_dim = config.n_embd // self.n_head
        self._wte: tvm.runtime.Tensor | None = None  # set by load_tables / init_tables, which always come next
        self._wpe: tvm.runtime.Tensor | None = None

    # -- tables -------------------------------------------------------------------
    def _set_tables(self, wte: np.ndarray, wpe: np.ndarray) -> None:
        self._wte = tvm.runtime.tensor(np.ascontiguousarray(wte, self.np_dtype))
        self._wpe = tvm.runtime.tensor(np.ascontiguousarray(wpe, self.np_dtype))

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        self._set_tables(np.array(wte, self.np_dtype), np.array(wpe, self.np_dtype))

    def tables(self):
        assert self._wte is not None and self._wpe is not None  # load_tables / init_tables come first
        return self._wte.numpy(), self._wpe.numpy()

    def init_tables(self, seed):
        """HF's own init (torch.manual_seed, then GPT2LMHeadModel: post_init -> _init_weights,
        tie_weights): the tables the exported model would hold."""
        import torch
        from transformers import GPT2LMHeadModel

        from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config

        torch.manual_seed(seed)
        model = GPT2LMHeadModel(gpt2_config(self.config.n_embd))
        self._set_tables(*(p.detach().numpy() for p in (model.transformer.wte.weight, model.transformer.wpe.weight)))

    def assign_wte_row(self, index, values):
        """Writes the row of the one wte tensor every call passes (a DLPack view of its memory)."""
        assert self._wte is not None
        np.from_dlpack(self._wte)[index] = values

    def parameters(self):
        """The compiled function's table parameters, by their torch names: the tie is one (wte is
        lm_head.weight), wpe the other."""
        return {
            name: (gpt2.N_VOCAB if "lm_head" in name else gpt2.N_CTX, self.config.n_embd) for name in self.table_names
        }

    # -- forward ------------------------------------------------------------------
    def _call(self, ids, past_length, h_final):
        assert self._wte is not None and self._wpe is not None
        batch = ids.shape[0] if len(ids.shape) else 1
        # the length as numpy takes a dimension (a zero-size np.zeros: it refuses negative and
        # fractional sizes, as the ONNX backends' caches do); tvm.runtime.empty alone reads 2.5 as 2
        shape = np.zeros((batch, self.n_head, past_length, 0), np.int8).shape[:3] + (self.head_dim,)
        cache = tvm.runtime.empty(shape, self.config.dtype)
        tables = [self._wte if "lm_head" in name else self._wpe for name in self.table_names]  # the function's order
        out = self.vm["main"](tvm.runtime.tensor(ids), cache, cache, tvm.runtime.tensor(h_final), *tables)
        return out

    def embed(self, ids, past_length=0):
        if not hasattr(ids, "shape") or not hasattr(ids, "dtype"):
            raise TypeError(f"{type(self).__name__}.embed: ids must be an array, got {type(ids).__name__}")
        no_h = np.zeros((1, 0, self.config.n_embd), self.np_dtype)  # the head's input, unused here
        return self._call(np.ascontiguousarray(ids), past_length, no_h)[0].numpy()

    def logits(self, h_final):
        h = np.ascontiguousarray(h_final, self.np_dtype)
        return self._call(np.zeros((1, 0), np.int64), 0, h)[1].numpy()
