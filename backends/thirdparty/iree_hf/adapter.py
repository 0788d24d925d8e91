"""Adapter for IREE running Hugging Face's GPT2LMHeadModel: the model hf-transformers judges
eager (backends/thirdparty/hf_transformers), here exported by torch.export, imported into MLIR
by iree-turbine (its torch frontend, torch-mlir's lowering of the aten ops), compiled by IREE's
compiler for the llvm-cpu backend (`--iree-hal-target-device=local
--iree-hal-local-target-device-backends=llvm-cpu`, tuned for the host CPU) and run by
iree.runtime's local-task driver. What is judged is the compiled code: torch-mlir's
lowering makes aten.embedding a gather (a linalg.generic reading the table with tensor.extract)
guarded by two cf.assert bounds checks, which IREE drops before codegen (waivers.toml), so its
answers to bad indices are IREE's, not torch's.

What is observed, and how (Capabilities.black_box):

- h: `GPT2Model.forward(..., output_hidden_states=True).hidden_states[0]`, the input of block 0
  (wte(ids) + wpe(positions); dropout is the identity in eval), the one output of the exported
  forward. Block 0 is traced but nothing returned depends on it, so IREE's compiler drops it.
- the tables: the exported functions take wte and wpe as arguments (torch.func.functional_call
  on the model's own modules, so the graph is HF's code with these tensors as its parameters),
  so load_tables / init_tables need no recompile: the tables are uploaded once to IREE device
  buffers (iree.runtime.asdevicearray) and every call reads those. The tie is the model's: the
  head's lm_head is called with the same wte buffer.
- the cache offset: a real DynamicCache holding past_length entries, as hf-transformers builds
  it; GPT2Model derives the positions from `cache.get_seq_length()`, which the export keeps as
  a symbolic size. The cache's keys are built inside the graph as a stride-0 expand of a zero
  to [B, n_head, past, head_dim], `past` being the length of a `past` argument (int8 zeros of
  that length: 1 byte per entry, so a cache of 10**6 entries costs 1 MB, not B * 3 GB). That
  array comes from np.zeros(past_length), which rejects negative, fractional and bool lengths
  itself: that, not IREE, is what BOUNDS-PAST-LENGTH sees.
- logits: the model's own tied `lm_head` (nn.Linear) applied to h_final, a function of its own.
- init: torch.manual_seed(seed) then GPT2LMHeadModel(config): HF's init, whose tables are what
  an export of that model would hold; they are uploaded as above.
- parameters(): the floating-point tensors the two compiled functions read: the table
  arguments, and any of the model's parameters the exported graphs still use after dead-code
  elimination (none: block 0's are dropped).
- dtypes: float32 and float16 (the model exported in that dtype, the tables rounded by torch's
  .to(dtype)). bfloat16 is not claimed: iree.runtime takes and returns numpy arrays, and numpy
  has no bfloat16 (ml_dtypes' would be a host conversion of our own, not the engine's dtype
  handling); not built.
- gradients: not claimed. IREE compiles inference programs; a backward would be torch's
  autograd exported again, not the engine's.
- mutable_tables: not claimed. The engine holds no tables of its own between calls: each call
  is given the device buffers the adapter uploaded, so an in-place row update would be the
  adapter's numpy write and a new upload, judging our code, not IREE's. TIED-STORAGE is "not
  claimed".

The adapter adds no checks: ids go to the compiled function as the caller gives them, save that
signed integer ids narrower than int64 are widened to it (lossless; the graph was exported with
int64 ids, as HF's tokenizers return them, and torch's eager nn.Embedding takes int32 as well:
iree.runtime would refuse int32 for the element type alone). iree.runtime checks the argument's
rank and element type against the function's signature (float, bool and unsigned ids reach it),
so whatever the compiled gather does with an out-of-range id or position is what the suite
sees.

Compilation: an export and a compile per (n_embd, dtype), lazily on the first embed or
logits call at that width (SHAPE-TABLES only loads and reads tables at the other widths), then
kept in this process and as .vmfb files in the backend's cache folder (GPT2C_IREE_HF_CACHE, set
by the registry entry's child_env, else this user's private cache folder), keyed by everything
the module depends on (width, dtype, the compiler flags, the versions of torch, transformers,
iree-base-compiler and iree-turbine, this file's source and gpt2_config's, and the host CPU the
code is tuned for). The next process loads the .vmfb without importing torch for the export.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from importlib.metadata import version

import iree.runtime as ireert
import numpy as np

from gpt2_conformance.api import gpt2, machine
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables
from gpt2_conformance.backends.thirdparty.onnx_hf_common import to_model_dtype

DTYPES = {"float32": np.float32, "float16": np.float16}
DRIVER = "local-task"
COMPILE_FLAGS = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
)
CACHE_ENV = "GPT2C_IREE_HF_CACHE"
CONFIG_MODULE = "gpt2_conformance.backends.thirdparty.hf_transformers.adapter"  # its gpt2_config: the model exported
FUNCTIONS = ("embed", "head")
_MODULES: dict[tuple[int, str], CompiledGPT2] = {}
_CONFIG: ireert.Config | None = None


def _runtime_config() -> ireert.Config:
    """One driver instance for the process (each Config starts the local-task driver's threads)."""
    global _CONFIG
    if _CONFIG is None:
        _CONFIG = ireert.Config(DRIVER)
    return _CONFIG


class CompiledGPT2:
    """The two compiled functions of one (n_embd, dtype), loaded into an iree.runtime context."""

    def __init__(self, vmfbs: dict[str, bytes], parameters: dict[str, tuple[int, ...]]):
        config = _runtime_config()
        self.device = config.device
        self.parameters = parameters
        self.functions = {}
        for name in FUNCTIONS:
            context = ireert.SystemContext(config=config)
            context.add_vm_module(ireert.VmModule.copy_buffer(config.vm_instance, vmfbs[name]))
            self.functions[name] = context.modules.module["main"]


def _export_modules(n_embd: int, dtype_name: str):
    """(embed, head) torch modules around one GPT2LMHeadModel(gpt2_config(n_embd)) in dtype, with
    example inputs and dynamic shapes for torch.export (imports torch and transformers)."""
    import torch
    from transformers import DynamicCache, GPT2LMHeadModel
    from transformers import initialization as hf_init

    from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config

    dtype, config = getattr(torch, dtype_name), gpt2_config(n_embd)
    with hf_init.no_init_weights():  # the tables are arguments: skip the init
        model = GPT2LMHeadModel(config)
    model.tie_weights()
    model = model.to(dtype).eval()
    n_head, head_dim = config.n_head, n_embd // config.n_head

    class Embed(torch.nn.Module):
        """(input_ids, past, wte, wpe) -> hidden_states[0] through GPT2Model's own forward."""

        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids, past, wte, wpe):
            kv = torch.zeros((), dtype=wte.dtype).expand(input_ids.shape[0], n_head, past.shape[0], head_dim)
            cache = DynamicCache(config=self.lm.config)
            layer = cache.layers[0]
            # what DynamicLayer.update does on its first call, without its torch.cat copy
            layer.lazy_initialization(kv, kv)
            layer.keys, layer.values = kv, kv
            tables = {"wte.weight": wte, "wpe.weight": wpe}
            kwargs = {"input_ids": input_ids, "cache": cache, "use_cache": True, "output_hidden_states": True}
            return torch.func.functional_call(self.lm.transformer, tables, kwargs=kwargs).hidden_states[0]

    class Head(torch.nn.Module):
        """(h_final, wte) -> the model's own lm_head(h_final) with wte as its weight (the tie)."""

        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, h_final, wte):
            return torch.func.functional_call(self.lm.lm_head, {"weight": wte}, (h_final,))

    wte = torch.zeros(gpt2.N_VOCAB, n_embd, dtype=dtype)
    wpe = torch.zeros(gpt2.N_CTX, n_embd, dtype=dtype)
    batch, seq, past = 2, 5, 3  # sizes of 0 or 1 would be specialised by torch.export
    dim = torch.export.Dim
    b, t, p = dim("batch"), dim("seq", min=0), dim("past", min=0)
    embed = (
        Embed(model),
        (torch.zeros(batch, seq, dtype=torch.int64), torch.zeros(past, dtype=torch.int8), wte, wpe),
        {"input_ids": {0: b, 1: t}, "past": {0: p}, "wte": None, "wpe": None},
    )
    head = (
        Head(model),
        (torch.zeros(batch, seq, n_embd, dtype=dtype), wte),
        {"h_final": {0: b, 1: t}, "wte": None},
    )
    return {"embed": embed, "head": head}


def _compile(n_embd: int, dtype_name: str) -> tuple[dict[str, bytes], dict[str, tuple[int, ...]]]:
    """torch.export -> iree-turbine import -> IREE compile, for both functions: (.vmfb bytes by
    function, the float tensors the exported graphs read, by name)."""
    import iree.compiler
    import iree.turbine.aot as aot
    import torch

    vmfbs, parameters = {}, {}
    for name, (module, example, dynamic) in _export_modules(n_embd, dtype_name).items():
        program = torch.export.export(module, example, dynamic_shapes=dynamic, strict=False)
        used = _inputs_the_outputs_read(program.graph)
        for spec in program.graph_signature.input_specs:
            arg = getattr(spec.arg, "name", None)
            if spec.kind == torch.export.graph_signature.InputKind.PARAMETER and arg in used and spec.target:
                parameters[spec.target] = tuple(program.state_dict[spec.target].shape)
        # the table arguments, named as the model's own parameters they stand for
        parameters["transformer.wte.weight"] = (gpt2.N_VOCAB, n_embd)
        if name == "embed":
            parameters["transformer.wpe.weight"] = (gpt2.N_CTX, n_embd)
        mlir = str(aot.export(program).mlir_module)
        vmfbs[name] = bytes(iree.compiler.compile_str(mlir, extra_args=list(COMPILE_FLAGS)))
    return vmfbs, parameters


def _inputs_the_outputs_read(graph) -> set[str]:
    """Names of the graph's placeholders the outputs depend on: the exported graph still holds
    block 0 (whose outputs nothing returns, and IREE's compiler drops), so a placeholder with
    users is not enough."""
    output = next(node for node in graph.nodes if node.op == "output")
    seen, stack = set(), [output]
    while stack:
        for node in stack.pop().all_input_nodes:
            if node not in seen:
                seen.add(node)
                stack.append(node)
    return {node.name for node in seen if node.op == "placeholder"}


def _host_cpu() -> str:
    """What --iree-llvmcpu-target-cpu=host tuned the code for (a .vmfb is not moved across CPUs)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return ""


def _disk_key(n_embd: int, dtype: str) -> str:
    spec = importlib.util.find_spec(CONFIG_MODULE)  # found, not imported (it imports torch)
    assert spec is not None and spec.origin is not None  # a module of this package
    sources = [open(path, "rb").read() for path in (__file__, spec.origin)]
    what = {
        "n_embd": n_embd,
        "dtype": dtype,
        "flags": COMPILE_FLAGS,
        "cpu": hashlib.sha256(_host_cpu().encode()).hexdigest(),
        "sources": [hashlib.sha256(src).hexdigest() for src in sources],
        "versions": [version(p) for p in ("torch", "transformers", "iree-base-compiler", "iree-turbine")],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _cache_folder() -> str | None:
    folder = os.environ.get(CACHE_ENV)
    if folder and os.path.isdir(folder):
        return folder
    return machine.private_cache_folder("iree-hf-cache")


def compiled(n_embd: int, dtype: str) -> CompiledGPT2:
    """The compiled model for (n_embd, dtype): from this process, else from the cache folder,
    else exported and compiled now (and written there)."""
    key = (n_embd, dtype)
    if key in _MODULES:
        return _MODULES[key]
    folder = _cache_folder()
    path = os.path.join(folder, _disk_key(n_embd, dtype) + ".iree") if folder else ""
    found = None
    if path:
        try:
            with open(path, "rb") as f:
                header = json.loads(f.readline())
                blob = f.read()
            sizes = header["sizes"]
            vmfbs = {name: blob[sum(sizes[:i]) : sum(sizes[: i + 1])] for i, name in enumerate(FUNCTIONS)}
            found = vmfbs, {k: tuple(v) for k, v in header["parameters"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            found = None
    if found is None:
        found = _compile(n_embd, dtype)
        if path:
            vmfbs, parameters = found
            header = json.dumps({"sizes": [len(vmfbs[n]) for n in FUNCTIONS], "parameters": parameters})
            content = header.encode() + b"\n" + b"".join(vmfbs[n] for n in FUNCTIONS)
            machine.replace_atomically(path, lambda f: f.write(content))  # refused: compiled again next time
    _MODULES[key] = CompiledGPT2(*found)
    return _MODULES[key]


class IreeHFAdapter(Adapter):
    capabilities = Capabilities(
        dtypes=tuple(DTYPES),
        devices=("cpu",),
        gradients=False,
        mutable_tables=False,
        black_box="HF GPT2LMHeadModel exported by torch.export, imported by iree-turbine, compiled by IREE "
        "(llvm-cpu, host) and run by iree.runtime local-task; h = hidden_states[0], the compiled forward's "
        "output; offset from a DynamicCache of past_length entries; logits = the compiled lm_head with wte",
    )

    @classmethod
    def implementation(cls) -> str:
        return (
            f"iree-base-compiler {version('iree-base-compiler')} (llvm-cpu, host) and iree-base-runtime "
            f"{version('iree-base-runtime')} ({DRIVER}) running transformers {version('transformers')} "
            f"GPT2LMHeadModel exported by torch {version('torch')} torch.export, imported by iree-turbine "
            f"{version('iree-turbine')}"
        )

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        name = type(self).__name__
        if config.dtype not in self.capabilities.dtypes:
            raise ValueError(f"{name}: dtype {config.dtype!r} is not one of {self.capabilities.dtypes}")
        if config.device not in self.capabilities.devices:
            raise ValueError(f"{name}: device {config.device!r} is not one of {self.capabilities.devices}")
        self.np_dtype = DTYPES[config.dtype]
        # set by _set_tables, which load_tables / init_tables always call first
        self._wte: np.ndarray | None = None
        self._wpe: np.ndarray | None = None
        self._device_tables: tuple | None = None

    def _model(self) -> CompiledGPT2:
        return compiled(self.config.n_embd, self.config.dtype)

    # -- tables -------------------------------------------------------------------
    def _set_tables(self, wte: np.ndarray, wpe: np.ndarray) -> None:
        self._wte, self._wpe = wte, wpe
        self._device_tables = None  # uploaded on the first call that reads them

    def _tables_on_device(self) -> tuple:
        if self._device_tables is None:
            if self._wte is None or self._wpe is None:
                raise RuntimeError(f"{type(self).__name__}: no tables yet (load_tables or init_tables first)")
            device = self._model().device
            self._device_tables = (ireert.asdevicearray(device, self._wte), ireert.asdevicearray(device, self._wpe))
        return self._device_tables

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        dtype = self.config.dtype
        self._set_tables(to_model_dtype(wte, dtype).copy(), to_model_dtype(wpe, dtype).copy())

    def tables(self):
        """The arrays uploaded to the engine (in the model's dtype): IREE's calls only read them."""
        if self._wte is None or self._wpe is None:
            raise RuntimeError(f"{type(self).__name__}: no tables yet (load_tables or init_tables first)")
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
        return dict(self._model().parameters)

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        if not hasattr(ids, "shape") or not hasattr(ids, "dtype"):
            raise TypeError(f"{type(self).__name__}.embed: ids must be an array, got {type(ids).__name__}")
        if isinstance(ids, np.ndarray) and ids.dtype.kind == "i" and ids.dtype.itemsize < 8:
            ids = ids.astype(np.int64)  # lossless widening to the exported int64 (module docstring)
        past = np.zeros(past_length, np.int8)  # its length is the offset (module docstring)
        wte, wpe = self._tables_on_device()
        return self._model().functions["embed"](ids, past, wte, wpe).to_host()

    def logits(self, h_final):
        h = to_model_dtype(h_final, self.config.dtype)
        wte, _ = self._tables_on_device()
        return self._model().functions["head"](h, wte).to_host()
