"""Adapter for ExecuTorch running Hugging Face transformers' GPT2Model: the model exported by
`torch.export`, lowered by `executorch.exir.to_edge_transform_and_lower` to a .pte program of
ExecuTorch's portable CPU kernels (no delegate), and run by ExecuTorch's runtime through its Python
binding (`executorch.runtime.Runtime.get()`, `load_program`, `load_method`, `execute`). What is
judged is the runtime and its portable kernels: `aten.embedding` is ExecuTorch's own
kernels/portable/cpu/op_embedding.cpp, with its own index checks, and the inputs are checked by
the runtime against the program's declared types and shapes.

What is observed, and how (Capabilities.black_box):

- h: `GPT2Model.forward(..., output_hidden_states=True).hidden_states[0]`, the input of block 0,
  the one output of the exported program. The model has one block (as hf-transformers); since
  only h is returned, torch.export's dead-code elimination drops the block, and the program is
  transformers' embedding code: wte(input_ids) + wpe(position_ids), dropout (identity in eval).
- the tables: inputs of the program, not constants baked into the .pte. The module is exported
  through `torch.func.functional_call` with wte and wpe as arguments, so one program per n_embd,
  dtype and shape bucket serves every load_tables / init_tables of the suite (re-exporting for
  every table the suite loads would take seconds each). The gather is the same `aten.embedding`
  on the same portable kernel either way. mutable_tables is NOT claimed: the program holds no
  table of its own to update in place (the adapter's array would be written, not the engine's).
- the cache offset: an int64 input `past_length` of shape [1]; the program computes the positions
  as `arange(T) + past_length` and passes them to GPT2Model as position_ids. transformers' own
  offset arithmetic (`cache.get_seq_length()` of a DynamicCache) is not exported: an ExecuTorch
  method takes tensors, and a cache tensor of past_length entries would have to be real memory
  of a planned size. The addition is the program's (one aten.add in the graph), not the host's.
  past_length reaches the runtime as a [1] tensor of its own values: a signed integer of any
  width as int64 (lossless), a float or bool past_length as a float or bool tensor, which the
  runtime rejects against the program's int64 input (the adapter adds no check of its own).
- ids: the program's index input is int64 (torch's and transformers' index type); signed integer
  ids of another width (int32) are widened to int64 on the host, losslessly, as a deployment
  feeding int32 ids would; float, bool and unsigned ids go to the runtime as they are, which
  rejects the dtype ("Input 0 has unexpected scalar type").
- logits: a second program, transformers' tied `lm_head` (nn.Linear, bias-free) applied to an
  h_final input with wte as its weight (the same wte input as the embedding's: the tie).
- init: HF's own (torch.manual_seed, then GPT2LMHeadModel(config): post_init -> _init_weights,
  tie_weights), whose tables are what an export of that model would hold.
- parameters(): the shapes of the embedding program's two table inputs, read from the loaded
  program's metadata (MethodMeta.input_tensor_meta), named as the model names them (the tied
  head reads the same wte input and adds none).
- gradients: NOT claimed. ExecuTorch runs inference programs; its training path
  (executorch.extension.training) is a separate joint-graph export, not what is deployed.

Shapes: ExecuTorch plans every intermediate's memory at export for the upper bound of each
dynamic dimension (`torch.export.Dim(min, max)`), so one program with unbounded batch and length
cannot be loaded (std::bad_alloc). Each program is exported for a bucket of shapes, batch <= B
and length <= T: h for (64, 8), (16, 64) and (3, 2048), the shapes the suite draws
(conformance/runtime/strategies.py), logits for (4, 16); a call outside every bucket gets a
bucket of the next powers of two. A call runs on the smallest bucket that holds it, so no bucket
bound is ever the cause of an error. Programs are written to the backend's cache folder
(GPT2C_EXECUTORCH_CACHE, the registry's child_env), keyed by every version involved, so the
suite's processes do not export again.

The adapter adds no checks: ids go to the runtime as torch tensors of the caller's dtype and
rank, tables as the caller's arrays rounded to the model's dtype as model.to(dtype) rounds them.
Every array is handed over in torch's own contiguous layout (a copy): the binding's conversion
of a torch tensor (extension/tensor/tensor_ptr.cpp, make_tensor_ptr) checks the strides against
the ones it computes and ABORTS the process when they differ, and numpy gives an empty array
strides of 0 where torch computes 1 (np.zeros((3, 0)) -> strides (0, 0); seen while building
this adapter: "assert failed (strides[i] == computed_strides[i] || sizes[i] == 1)", SIGABRT).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from importlib.metadata import version

import numpy as np
import torch
from executorch.runtime import Method, Runtime

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables
from gpt2_conformance.backends.thirdparty.torch_blackbox import TORCH_DTYPES, from_numpy, to_numpy

CACHE_ENV = "GPT2C_EXECUTORCH_CACHE"  # set by the registry entry's child_env (the backend's cache folder)
H_BUCKETS = ((64, 8), (16, 64), (3, 2 * gpt2.N_CTX))  # (max batch, max length) of the h programs
LOGITS_BUCKETS = ((4, 16),)
TABLE_NAMES = ("transformer.wte.weight", "transformer.wpe.weight")  # the model's names for the two table inputs


def _pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 1).bit_length()


def bucket(batch: int, length: int, buckets: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """The smallest (by tokens) bucket holding [batch, length]; else the next powers of two."""
    fits = [b for b in buckets if batch <= b[0] and length <= b[1]]
    if fits:
        return min(fits, key=lambda b: b[0] * b[1])
    return _pow2(batch), _pow2(length)


def versions() -> str:
    return (
        f"executorch {version('executorch')} (portable kernels) running transformers {version('transformers')} "
        f"GPT2Model exported by torch.export of torch {version('torch')}"
    )


class _HProgram(torch.nn.Module):
    """h = GPT2Model's hidden_states[0] with the tables as inputs and positions past_length + t."""

    def __init__(self, transformer):
        super().__init__()
        self.transformer = transformer

    def forward(self, input_ids, past_length, wte, wpe):
        positions = torch.arange(input_ids.shape[-1], dtype=torch.int64) + past_length
        positions = positions.unsqueeze(0).expand(input_ids.shape[0], -1)
        out = torch.func.functional_call(
            self.transformer,
            {"wte.weight": wte, "wpe.weight": wpe},
            (),
            {"input_ids": input_ids, "position_ids": positions, "output_hidden_states": True, "use_cache": False},
            strict=False,
        )
        return out.hidden_states[0]


class _LogitsProgram(torch.nn.Module):
    """logits = GPT2LMHeadModel's lm_head(h_final) with wte as its (tied) weight."""

    def __init__(self, lm_head):
        super().__init__()
        self.lm_head = lm_head

    def forward(self, h_final, wte):
        return torch.func.functional_call(self.lm_head, {"weight": wte}, (h_final,))


def _model(n_embd: int, dtype: torch.dtype):
    from transformers import GPT2LMHeadModel
    from transformers import initialization as hf_init

    from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config

    with hf_init.no_init_weights():  # the tables are program inputs; the block's weights are dead code
        model = GPT2LMHeadModel(gpt2_config(n_embd))
    # transformers types .to through functools.wraps, whose _Wrapped loses the bound self (as hf-transformers)
    return model.to(dtype).eval()  # type: ignore[arg-type, unused-ignore]


def export_program(kind: str, n_embd: int, dtype: str, shape: tuple[int, int]) -> bytes:
    """The .pte of program `kind` ("h" or "logits") for batch <= shape[0], length <= shape[1]."""
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import Dim, export

    tdtype = TORCH_DTYPES[dtype]
    model = _model(n_embd, tdtype)
    wte = torch.zeros(gpt2.N_VOCAB, n_embd, dtype=tdtype)
    # sample sizes inside the bucket and above 1 (export specialises sizes 0 and 1)
    batch = Dim("batch", min=1, max=shape[0]) if shape[0] > 1 else None
    length = Dim("length", min=1, max=shape[1]) if shape[1] > 1 else None
    sample = (min(2, shape[0]), min(3, shape[1]))
    dims = {i: d for i, d in enumerate((batch, length)) if d is not None} or None
    module: torch.nn.Module
    if kind == "h":
        module = _HProgram(model.transformer)
        wpe = torch.zeros(gpt2.N_CTX, n_embd, dtype=tdtype)
        args: tuple = (torch.zeros(sample, dtype=torch.int64), torch.zeros(1, dtype=torch.int64), wte, wpe)
        dynamic: tuple = (dims, None, None, None)
    else:
        module = _LogitsProgram(model.lm_head)
        args = (torch.zeros(*sample, n_embd, dtype=tdtype), wte)
        dynamic = (dims, None)
    with torch.no_grad():
        program = export(module, args, dynamic_shapes=dynamic, strict=False)
    return to_edge_transform_and_lower(program).to_executorch().buffer


def _cache_folder() -> str:
    folder = os.environ.get(CACHE_ENV) or os.path.join(tempfile.gettempdir(), f"gpt2c-executorch-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def program_path(kind: str, n_embd: int, dtype: str, shape: tuple[int, int]) -> str:
    """The cached .pte (exported on the first use): its name hashes every version and the program's source."""
    import inspect

    source = inspect.getsource(_HProgram if kind == "h" else _LogitsProgram) + inspect.getsource(export_program)
    key = hashlib.sha256(f"{versions()}|{source}".encode()).hexdigest()[:16]
    path = os.path.join(_cache_folder(), f"{kind}-{n_embd}-{dtype}-{shape[0]}x{shape[1]}-{key}.pte")
    if not os.path.exists(path):
        data = export_program(kind, n_embd, dtype, shape)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: the suite's processes may export the same program at once
    return path


_METHODS: dict[str, Method] = {}  # path -> loaded method, for the process


def method(kind: str, n_embd: int, dtype: str, shape: tuple[int, int]) -> Method:
    path = program_path(kind, n_embd, dtype, shape)
    if path not in _METHODS:
        _METHODS[path] = Runtime.get().load_program(path).load_method("forward")
    return _METHODS[path]


def _tensor(array, widen: bool = False) -> torch.Tensor:
    """A torch tensor of the caller's values and rank, in torch's own contiguous layout (the module
    docstring: the binding aborts on the strides numpy gives an empty array). widen: signed integers
    become int64, the program's index type (lossless); every other dtype is kept for the runtime."""
    values = np.asarray(array)
    if widen and values.dtype.kind == "i":
        values = values.astype(np.int64)
    return from_numpy(values).clone(memory_format=torch.contiguous_format)


class ExecuTorchHFAdapter(Adapter):
    capabilities = Capabilities(
        dtypes=tuple(TORCH_DTYPES),
        devices=("cpu",),
        gradients=False,  # inference programs (module docstring)
        mutable_tables=False,  # the tables are program inputs (module docstring)
        black_box="HF GPT2Model exported by torch.export, lowered to an ExecuTorch .pte (portable kernels), "
        "run by executorch.runtime; h = hidden_states[0], the program's output; tables are program inputs; "
        "offset = an int64 past_length input (positions arange(T) + past_length in the program); "
        "logits = a second program, lm_head(h_final) with wte as its weight",
    )

    @classmethod
    def implementation(cls) -> str:
        return versions()

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        if config.dtype not in TORCH_DTYPES:
            raise ValueError(f"ExecuTorchHFAdapter: dtype {config.dtype!r} is not one of {tuple(TORCH_DTYPES)}")
        if config.device != "cpu":
            raise ValueError(f"ExecuTorchHFAdapter: device {config.device!r}: only cpu is claimed")
        self.dtype = TORCH_DTYPES[config.dtype]
        # set by load_tables / init_tables, which always come next
        self._wte: torch.Tensor | None = None
        self._wpe: torch.Tensor | None = None

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        # rounded as model.to(dtype) rounds; a contiguous copy (_tensor), since the suite reuses its arrays
        # and the runtime takes no other layout for a program input
        self._wte, self._wpe = (_tensor(t).to(self.dtype) for t in (wte, wpe))

    def tables(self):
        assert self._wte is not None and self._wpe is not None  # load_tables / init_tables come first
        return to_numpy(self._wte), to_numpy(self._wpe)

    def init_tables(self, seed):
        from transformers import GPT2LMHeadModel

        from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config

        torch.manual_seed(seed)
        model = GPT2LMHeadModel(gpt2_config(self.config.n_embd)).to(self.dtype)
        self._wte, self._wpe = (
            p.detach().clone() for p in (model.transformer.wte.weight, model.transformer.wpe.weight)
        )

    def assign_wte_row(self, index, values):
        raise NotImplementedError("ExecuTorchHFAdapter: mutable_tables is not claimed (the tables are program inputs)")

    def parameters(self):
        """The shapes of the embedding program's table inputs (inputs 2 and 3), read from the loaded
        program's metadata: what the engine was built to take, whatever was loaded."""
        meta = method("h", self.config.n_embd, self.config.dtype, H_BUCKETS[0]).metadata
        return {name: tuple(meta.input_tensor_meta(i).sizes()) for i, name in enumerate(TABLE_NAMES, start=2)}

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        if not hasattr(ids, "shape") or not hasattr(ids, "dtype"):
            raise TypeError(f"ExecuTorchHFAdapter.embed: ids must be an array, got {type(ids).__name__}")
        shape = tuple(ids.shape)
        batch, length = (shape[0] if len(shape) == 2 else 1), (shape[-1] if shape else 1)
        run = method("h", self.config.n_embd, self.config.dtype, bucket(batch, length, H_BUCKETS))
        past = _tensor(past_length, widen=True).reshape(1)
        return to_numpy(run.execute([_tensor(ids, widen=True), past, self._wte, self._wpe])[0])

    def logits(self, h_final):
        h = _tensor(h_final).to(self.dtype)
        shape = tuple(h.shape)
        batch, length = (shape[0] if len(shape) == 3 else 1), (shape[1] if len(shape) == 3 else 1)
        run = method("logits", self.config.n_embd, self.config.dtype, bucket(batch, length, LOGITS_BUCKETS))
        return to_numpy(run.execute([h, self._wte])[0])
