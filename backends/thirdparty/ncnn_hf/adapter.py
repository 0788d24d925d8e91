"""Adapter for Tencent's ncnn running Hugging Face's GPT2LMHeadModel converted by pnnx: the
route ncnn's own documentation gives for a PyTorch model (torch.jit.trace -> pnnx -> .param/.bin).
Judged as it is: ncnn's Embed layer is the gather under test.

What is observed, and how (Capabilities.black_box):

- the net: GPT2LMHeadModel(gpt2_config(n_embd)) (the hf-transformers backend's config, one block)
  around a wrapper taking (input_ids, position_ids, h_final) and returning (h, logits):
  h = the model's own GPT2Model.forward(...).hidden_states[0] (wte(ids) + wpe(positions), the
  input of block 0; dropout is identity in eval) and logits = a bias-free nn.Linear on h_final
  holding wte. pnnx.export traces it (torch.jit.trace) with two sequence lengths, so the
  sequence axis is dynamic, and writes float32 weights (fp16=False; pnnx's default writes
  float16). pnnx prunes block 0 (no output reads it) and converts wte/wpe to two ncnn `Embed`
  layers (h = BinaryOp add of both, blob "out0") and the head to a `Gemm` with wte as its
  constant B (blob "out1").
- the tie: pnnx cannot convert HF's tied head. With lm_head.weight being transformer.wte.weight,
  pnnx 20261020 makes the head a Gemm whose inputs are the table (a MemoryData copy) and a
  second constant copy of it, with h_final not read at all: its output is [50257, 50257]
  (about 10 GB; the process was killed for memory while building this adapter). So the traced
  wrapper's head is an untied nn.Linear holding a copy of wte, and the ncnn file holds wte
  twice (Embed's and Gemm's weights): every ncnn deployment of a pnnx-converted GPT-2 does, as
  pnnx writes each layer its own weights. The adapter writes the one table it is given into
  both (and wpe into its Embed), so TIED-HEAD is judged on ncnn's Gemm; parameters() lists the
  three weights the file holds, and TIED-STORAGE (one table for both) is not claimed
  (mutable_tables=False: ncnn has no in-place write to a loaded weight).
- the tables: the conversion is done once per width (cached on disk, see _converted) with
  distinct tables, and the byte ranges of wte and wpe inside the .bin are found there (wte
  twice, wpe once; everything else is ncnn's per-weight header words). load_tables /
  init_tables write a new .bin from those ranges and load it into a new ncnn.Net
  (Net.load_model from that file); tables() returns the arrays handed in (ncnn has no read-back of weights).
- the options: ncnn stores and computes in float16/bfloat16 on CPUs that have the instructions
  (Option use_fp16_storage/packed/arithmetic, use_bf16_storage), so those options are switched
  off: the net computes in float32, the one dtype claimed. float16 and bfloat16 are not
  claimed: ncnn's reduced-precision paths round a float32 model's storage per layer, which is
  not a float16 model (tables rounded once, float16 outputs), and the converted file is float32.
- the batch: pnnx drops the batch axis (ncnn's Mat is one sample), so each row of ids [B, T]
  runs through its own Extractor and the rows are stacked.
- the cache offset: ncnn has no cache here and derives no positions; the adapter hands the net
  position_ids = past_length + arange(T) for every row (what GPT2Model computes from a cache,
  modeling_gpt2.py, and what an ncnn deployment's host code does). The engine's gather of wpe
  is still what is judged: a position past 1023, or a negative one from a negative past_length,
  goes to ncnn's Embed as it is. The offset arithmetic itself is the adapter's, not ncnn's.
- init: torch.manual_seed(seed) then GPT2LMHeadModel(config): HF's own init, whose tables are
  what a conversion of that model would hold.

The adapter's own checks, each because ncnn's Mat has no element type (its elements are 4-byte
values the layer reads as it likes; pnnx turns the int64 inputs into int32, "replace ncnn input
torch.long type with torch.int"): ids must be an integer array of rank 2, and ids and positions
must fit int32 (a larger value would wrap before ncnn saw it). Feeding float ids would hand
Embed the float's bits as an index; that is the host's error, not ncnn's, so it is refused
here with a TypeError that says so. Everything else (an id of -1, 50257 or 2**31 - 1, a position
of 1024) reaches ncnn's Embed unchanged: what the suite sees there is ncnn's verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import operator
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib.metadata import version

import ncnn
import numpy as np

from gpt2_conformance.api import gpt2, machine
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables

CACHE_VARIABLE = "GPT2C_NCNN_CACHE"  # the backend's child_env names its private cache folder
CACHE_NAME = "ncnn-pnnx"  # machine.private_cache_folder's name where the variable is not set
INPUTS = ("in0", "in1", "in2")  # pnnx's names: input_ids, position_ids, h_final
H_BLOB, LOGITS_BLOB = "out0", "out1"
INT32 = np.iinfo(np.int32)
CONFIG_MODULE = "gpt2_conformance.backends.thirdparty.hf_transformers.adapter"


@dataclass(frozen=True)
class Converted:
    """One pnnx conversion: the .param text and the .bin as pieces: bytes pnnx wrote (ncnn's
    per-weight header words) and the places where a table goes ("wte" or "wpe")."""

    param: str
    pieces: tuple[bytes | str, ...]
    weights: dict[str, tuple[int, ...]]  # layer name -> shape of the weight it holds


_CONVERTED: dict[int, Converted] = {}


def _cache_folder() -> str | None:
    folder = os.environ.get(CACHE_VARIABLE)
    if folder:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        return folder
    return machine.private_cache_folder(CACHE_NAME)


def _disk_key(n_embd: int) -> str:
    """Everything the conversion depends on: the width, this file's and gpt2_config's sources, and
    the versions of what traced and converted it."""
    import importlib.util

    spec = importlib.util.find_spec(CONFIG_MODULE)
    assert spec is not None and spec.origin is not None  # a module of this package
    sources = [open(path, "rb").read() for path in (__file__, spec.origin)]
    what = {
        "n_embd": n_embd,
        "sources": [hashlib.sha256(s).hexdigest() for s in sources],
        "versions": [version(p) for p in ("torch", "transformers", "pnnx", "ncnn")],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _model(n_embd: int, seed: int | None):
    """GPT2LMHeadModel(gpt2_config(n_embd)) in eval mode, HF-initialised from `seed` (torch)."""
    import torch
    from transformers import GPT2LMHeadModel

    from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config

    if seed is not None:
        torch.manual_seed(seed)
    return GPT2LMHeadModel(gpt2_config(n_embd)).eval()


def _wrapper(model):
    """(input_ids, position_ids, h_final) -> (h, logits) through GPT2Model's own forward, with the
    head an untied copy of lm_head (pnnx mis-converts the tied one: module docstring)."""
    import torch

    class EmbedAndHead(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm
            self.head = torch.nn.Linear(lm.config.n_embd, lm.config.vocab_size, bias=False)
            self.head.weight = torch.nn.Parameter(lm.lm_head.weight.detach().clone())

        def forward(self, input_ids, position_ids, h_final):
            out = self.lm.transformer(
                input_ids=input_ids, position_ids=position_ids, use_cache=False, output_hidden_states=True
            )
            return out.hidden_states[0], self.head(h_final)

    return EmbedAndHead(model).eval()


def _convert(n_embd: int) -> Converted:
    """Trace the wrapper and convert it with pnnx (float32 weights, dynamic sequence length), then
    locate the tables in the .bin."""
    import pnnx
    import torch

    model = _model(n_embd, seed=0)  # distinct random tables: their bytes are found in the .bin below
    wte = model.transformer.wte.weight.detach().numpy().copy()
    wpe = model.transformer.wpe.weight.detach().numpy().copy()
    inputs = []
    for seq, head_seq in ((5, 3), (9, 7)):  # two lengths: pnnx makes the axis dynamic ("?")
        inputs.append(
            (
                torch.zeros(1, seq, dtype=torch.int64),
                torch.arange(seq).unsqueeze(0),
                torch.zeros(1, head_seq, n_embd),
            )
        )
    work = tempfile.mkdtemp(prefix="ncnn-hf-")
    try:
        base = os.path.join(work, "gpt2")
        with contextlib.redirect_stdout(io.StringIO()):  # pnnx's progress lines
            pnnx.export(
                _wrapper(model),
                base + ".pt",
                inputs[0],
                inputs[1],
                fp16=False,
                ncnnparam=base + ".ncnn.param",
                ncnnbin=base + ".ncnn.bin",
            )
        with open(base + ".ncnn.param") as f:
            param = f.read()
        with open(base + ".ncnn.bin", "rb") as f:
            blob = f.read()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Converted(param, _pieces(blob, {"wte": wte.tobytes(), "wpe": wpe.tobytes()}), _weights(param))


def _pieces(blob: bytes, tables: dict[str, bytes]) -> tuple[bytes | str, ...]:
    """blob split at every occurrence of each table's bytes: the bytes between, and the table's name."""
    found = []
    for name, data in tables.items():
        at = blob.find(data)
        while at >= 0:
            found.append((at, name, len(data)))
            at = blob.find(data, at + len(data))
    found.sort()
    counts = {name: sum(1 for _, n, _ in found if n == name) for name in tables}
    if counts != {"wte": 2, "wpe": 1}:
        raise RuntimeError(f"ncnn-hf: expected wte twice (Embed, Gemm) and wpe once in pnnx's .bin, found {counts}")
    pieces: list[bytes | str] = []
    end = 0
    for at, name, size in found:
        pieces += [blob[end:at], name]
        end = at + size
    pieces.append(blob[end:])
    if sum(len(p) for p in pieces if isinstance(p, bytes)) > 64 * len(found):
        raise RuntimeError("ncnn-hf: pnnx's .bin holds more than the two tables and their headers")
    return tuple(pieces)


def _weights(param: str) -> dict[str, tuple[int, ...]]:
    """Layer name -> weight shape for the layers that hold a table: Embed (1=rows, 0=width) and a
    Gemm with a constant B (8=N rows, 9=K width)."""
    weights: dict[str, tuple[int, ...]] = {}
    for line in param.splitlines()[2:]:
        fields = line.split()
        kind, name = fields[0], fields[1]
        values = dict(f.split("=", 1) for f in fields if "=" in f)
        if kind == "Embed":
            weights[name] = (int(values["1"]), int(values["0"]))
        elif kind == "Gemm" and values.get("5") == "1":
            weights[name] = (int(values["8"]), int(values["9"]))
    return weights


def _read_disk(path: str) -> Converted | None:
    """One file per width: a line of JSON (param, weights, piece lengths and names), then the header bytes."""
    try:
        with open(path, "rb") as f:
            meta = json.loads(f.readline())
            rest = f.read()
    except (OSError, ValueError):
        return None
    pieces: list[bytes | str] = []
    at = 0
    for piece in meta["pieces"]:
        if isinstance(piece, str):
            pieces.append(piece)
        else:
            pieces.append(rest[at : at + piece])
            at += piece
    return Converted(meta["param"], tuple(pieces), {k: tuple(v) for k, v in meta["weights"].items()})


def _write_disk(path: str, converted: Converted) -> None:
    layout = [p if isinstance(p, str) else len(p) for p in converted.pieces]
    meta = json.dumps({"param": converted.param, "pieces": layout, "weights": converted.weights}).encode()
    body = b"".join(p for p in converted.pieces if isinstance(p, bytes))
    machine.replace_atomically(path, lambda f: f.write(meta + b"\n" + body))


def converted(n_embd: int) -> Converted:
    """The conversion for this width: kept for the process and on disk (the backend's CACHE)."""
    if n_embd in _CONVERTED:
        return _CONVERTED[n_embd]
    folder = _cache_folder()
    path = os.path.join(folder, _disk_key(n_embd) + ".ncnn") if folder else ""
    result = _read_disk(path) if path else None
    if result is None:
        result = _convert(n_embd)
        if path:
            _write_disk(path, result)
    _CONVERTED[n_embd] = result
    return result


def float32_options(net) -> None:
    """ncnn's reduced-precision storage and arithmetic off: the net computes in float32."""
    for option in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage"):
        setattr(net.opt, option, False)
    net.opt.use_vulkan_compute = False
    net.opt.num_threads = machine.threads()


class NcnnHFAdapter(Adapter):
    capabilities = Capabilities(
        dtypes=("float32",),
        devices=("cpu",),
        gradients=False,
        mutable_tables=False,
        black_box="HF GPT2LMHeadModel converted by pnnx to ncnn (float32), run by ncnn.Extractor one row at a "
        "time; h = blob out0 (Embed(wte) + Embed(wpe)); positions past_length + t handed in by the adapter; "
        "logits = blob out1 (Gemm holding wte) on an h_final input",
    )

    @classmethod
    def implementation(cls) -> str:
        return (
            f"ncnn {version('ncnn')} (Python bindings, CPU, float32) running transformers {version('transformers')} "
            f"GPT2LMHeadModel converted by pnnx {version('pnnx')} (torch {version('torch')} jit.trace)"
        )

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        name = type(self).__name__
        if config.dtype not in self.capabilities.dtypes:
            raise ValueError(f"{name}: dtype {config.dtype!r} is not one of {self.capabilities.dtypes}")
        if config.device not in self.capabilities.devices:
            raise ValueError(f"{name}: device {config.device!r} is not one of {self.capabilities.devices}")
        self.converted = converted(config.n_embd)
        self.net = None  # built by load_tables / init_tables, which always come next
        self._wte: np.ndarray | None = None
        self._wpe: np.ndarray | None = None

    # -- tables -------------------------------------------------------------------
    def _set_tables(self, wte: np.ndarray, wpe: np.ndarray) -> None:
        d = self.config.n_embd
        if wte.shape != (gpt2.N_VOCAB, d) or wpe.shape != (gpt2.N_CTX, d):
            raise ValueError(
                f"{type(self).__name__}: tables must be [{gpt2.N_VOCAB}, {d}] and [{gpt2.N_CTX}, {d}], "
                f"got {wte.shape} and {wpe.shape}"
            )
        tables = {"wte": wte, "wpe": wpe}
        net = ncnn.Net()
        float32_options(net)
        if net.load_param_mem(self.converted.param) != 0:
            raise RuntimeError("ncnn-hf: ncnn.Net.load_param_mem refused pnnx's .param")
        # from a file: ncnn copies what it reads there (the bindings' load_model_mem takes a str
        # whose buffer need not outlive the call, and returns nothing to check)
        with tempfile.TemporaryDirectory(prefix="ncnn-hf-") as folder:
            path = os.path.join(folder, "gpt2.ncnn.bin")
            with open(path, "wb") as f:
                for piece in self.converted.pieces:
                    f.write(tables[piece].tobytes() if isinstance(piece, str) else piece)
            if net.load_model(path) != 0:
                raise RuntimeError("ncnn-hf: ncnn.Net.load_model refused the assembled .bin")
        self.net, self._wte, self._wpe = net, wte, wpe

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        self._set_tables(np.array(wte, np.float32, order="C"), np.array(wpe, np.float32, order="C"))

    def tables(self):
        """The arrays handed to ncnn: it offers no read-back of a loaded weight."""
        assert self._wte is not None and self._wpe is not None, "load_tables or init_tables first"
        return self._wte.copy(), self._wpe.copy()

    def init_tables(self, seed):
        """HF's own init (torch.manual_seed, then GPT2LMHeadModel): the tables a conversion of
        that model would hold."""
        model = _model(self.config.n_embd, seed)
        wte, wpe = (p.detach().numpy().copy() for p in (model.transformer.wte.weight, model.transformer.wpe.weight))
        self._set_tables(wte, wpe)

    def parameters(self):
        """The weights the converted file holds, by ncnn layer name: wte twice (Embed, Gemm) and wpe."""
        return dict(self.converted.weights)

    # -- forward ------------------------------------------------------------------
    def _extract(self, blob: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
        assert self.net is not None, "load_tables or init_tables first"
        with self.net.create_extractor() as ex:
            for name, array in feeds.items():
                # ncnn.Mat views the array's buffer and holds no reference to it: a contiguous copy
                # made inside the call would be freed before clone() reads it
                contiguous = np.ascontiguousarray(array)
                ex.input(name, ncnn.Mat(contiguous).clone())
            rc, out = ex.extract(blob)
            if rc != 0:
                raise RuntimeError(f"ncnn Extractor.extract({blob!r}) returned {rc}")
            return np.array(out)

    def embed(self, ids, past_length=0):
        name = f"{type(self).__name__}.embed"
        if not hasattr(ids, "shape") or not hasattr(ids, "dtype"):
            raise TypeError(f"{name}: ids must be an array, got {type(ids).__name__}")
        if not np.issubdtype(ids.dtype, np.integer) or ids.dtype == np.bool_:
            raise TypeError(
                f"{name}: ids must be integers, got {ids.dtype} (ncnn's input Mat has no element type: "
                "float ids would reach its Embed layer as raw bits)"
            )
        if len(ids.shape) != 2:
            raise ValueError(f"{name}: ids must be [B, T], got shape {tuple(ids.shape)}")
        # an int, a numpy integer or a 0-d integer array (what __index__ accepts), never a bool
        if isinstance(past_length, (bool, np.bool_)) or getattr(past_length, "dtype", None) == np.bool_:
            raise TypeError(f"{name}: past_length must be an int, got {type(past_length).__name__} {past_length!r}")
        try:
            past_length = operator.index(past_length)
        except TypeError:
            raise TypeError(
                f"{name}: past_length must be an int, got {type(past_length).__name__} {past_length!r}"
            ) from None
        ids = np.asarray(ids)
        positions = int(past_length) + np.arange(ids.shape[1], dtype=np.int64)
        for what, values in (("ids", ids), ("positions past_length + t", positions)):
            if values.size and (values.min() < INT32.min or values.max() > INT32.max):
                raise ValueError(f"{name}: {what} must fit ncnn's int32 input, got a value outside [-2**31, 2**31)")
        d = self.config.n_embd
        rows = [
            self._extract(H_BLOB, {"in0": row.astype(np.int32), "in1": positions.astype(np.int32)}).reshape(-1, d)
            for row in ids
        ]
        return np.stack(rows) if rows else np.zeros((0, ids.shape[1], d), np.float32)

    def logits(self, h_final):
        h = np.asarray(h_final, np.float32)
        if h.ndim != 3 or h.shape[-1] != self.config.n_embd:
            raise ValueError(
                f"{type(self).__name__}.logits: h_final must be [B, T, {self.config.n_embd}], got {h.shape}"
            )
        rows = [self._extract(LOGITS_BLOB, {"in2": row}).reshape(h.shape[1], gpt2.N_VOCAB) for row in h]
        return np.stack(rows) if rows else np.zeros((0, h.shape[1], gpt2.N_VOCAB), np.float32)
