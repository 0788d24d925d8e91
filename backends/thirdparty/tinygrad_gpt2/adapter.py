"""Adapter for a GPT-2 embedding on tinygrad: OURS (model.py), written as tinygrad's
examples/gpt2.py writes it (no GPT-2 is packaged with tinygrad), on tinygrad's kernels for its
CPU device (C source compiled by clang). What is judged is tinygrad: `nn.Embedding` (a one-hot
compare of the ids against an arange, `where`, and a sum, which tinygrad's scheduler folds into
an indexed load), `Tensor.shrink` for the positions, `nn.Linear` for the head, its autograd, and
the kernels it generates and compiles for them.

What is observed, and how (Capabilities.black_box):

- h: `GPT2Embedding.embed(tokens, start_pos)`, the example's `wte(tokens) + wpe(pos)` (the input
  of its block 0), realised and read back with `Tensor.numpy()`.
- the cache offset: the example's own integer `start_pos` (its forward's argument after a
  prefill), used as it uses it: `allpos.shrink(((0, 1), (start_pos, start_pos + seqlen)))`.
  past_length is handed over unchanged.
- logits: the tied `lm_head(h)` (`nn.Linear` without bias whose weight is wte's tensor itself).
- tables: loaded as the example's GPT2.build loads its weights, with tinygrad's
  `nn.state.load_state_dict` (lm_head.weight given wte's), which refuses a table of the wrong shape;
  the arrays are rounded to the adapter's dtype first, as the example's FP16 load casts them.
- init: `Tensor.manual_seed(seed)`, then nn.Embedding's own initialiser (Tensor.glorot_uniform).
- gradients: tinygrad's autograd (`Tensor.backward`) through the same embed and head, wte and wpe
  with requires_grad.
- parameters(): wte.weight and wpe.weight; the head's weight is the same tensor, listed once.

Device: tinygrad's CPU device, named explicitly (tinygrad.helpers.DEV, set when this module is
imported, as `DEV=CPU` would, so that nn.Embedding's arange and every table land on it). The CPU
device compiles C with the `clang` found first on PATH, or the command in CC (tinygrad's
runtime/support/compiler_cpu.py); where there is no `clang` but a versioned `clang-N` is
installed (Debian's clang-14 package), CC is pointed at it, and where there is none, at zig's
clang from PyPI's ziglang package (a script that translates tinygrad's flags, _zig_cc), so that
`pip install` alone gives tinygrad a compiler. tinygrad keeps its compiled kernels
in a sqlite cache (CACHEDB), which the registry entry's child_env points at the backend's
private cache folder. The LLVM renderer still needs clang (the CPU device compiles its helper
programs with it), and the PYTHON device is an emulator far too slow for a 50257-row table.

bfloat16: the CPU device renders a bfloat16 kernel as C with `__bf16`, which clang before 17
rejects on x86-64 ("__bf16 is not supported on this target", seen with Debian 12's clang 14),
so a claim would hold on one machine and not on another. The adapter sets tinygrad's own
EMULATED_DTYPES to "bfloat16" (tinygrad/helpers.py L249) on every machine: tinygrad's software
bfloat16, which stores bfloat16 values in 16-bit words and computes in float32
(codegen/decomp/dtype.py L199-205, L129-136). What is judged for bfloat16 is that emulation, the
same everywhere.

The adapter adds no checks of its own: ids go to tinygrad as a Tensor of the numpy array's own
dtype and shape, so what tinygrad does with out-of-range ids, positions, float ids or other ranks
is what the suite sees (ids outside the table give zero rows: waivers.toml and upstream/).
"""

from __future__ import annotations

import os
import shutil
from importlib.metadata import version

import numpy as np

_CLANGS = ("clang", *(f"clang-{v}" for v in range(21, 13, -1)))

# zig's clang, from the ziglang package on PyPI (the tinygrad extra installs it), where the machine
# has no clang: tinygrad runs `CC -c -x c ... --target=<arch>-none-unknown-elf ... - -o -`, and
# `zig cc` takes the same flags but names a freestanding target its own way and writes its object
# to a file, so CC is this small translating script, written once beside tinygrad's kernel cache
_ZIG_CC = """#!{python}
import os, subprocess, sys, tempfile
import ziglang
zig = os.path.join(os.path.dirname(ziglang.__file__), "zig")
args, to_stdout, given = [], False, iter(sys.argv[1:])
for arg in given:
    if arg.startswith("--target="):
        args += ["-target", arg.split("=", 1)[1].split("-")[0] + "-freestanding-none"]
    elif arg == "-o":
        out = next(given)
        to_stdout = out == "-"
        args += [] if to_stdout else ["-o", out]
    else:
        args.append(arg)
with tempfile.TemporaryDirectory() as folder:
    obj = os.path.join(folder, "kernel.o")
    code = subprocess.call([zig, "cc", *args, "-g0"] + (["-o", obj] if to_stdout else []))
    if code == 0 and to_stdout:
        with open(obj, "rb") as f:
            sys.stdout.buffer.write(f.read())
sys.exit(code)
"""


def _zig_cc() -> str | None:
    """The path of the script that runs zig's clang for tinygrad (written on first use), or None
    where ziglang is not installed."""
    import importlib.util
    import sys
    import tempfile

    if importlib.util.find_spec("ziglang") is None:
        return None
    cachedb = os.environ.get("CACHEDB")  # the backend's private cache folder (its registry entry's child_env)
    folder = os.path.dirname(cachedb) if cachedb else os.path.join(tempfile.gettempdir(), "gpt2-conformance-tinygrad")
    path = os.path.join(folder, "zig-cc")
    text = _ZIG_CC.format(python=sys.executable)
    if not os.path.exists(path) or open(path).read() != text:
        os.makedirs(folder, exist_ok=True)
        partial = f"{path}.{os.getpid()}"
        with open(partial, "w") as f:
            f.write(text)
        os.chmod(partial, 0o755)
        os.replace(partial, path)  # whole or not at all: another process may be reading it
    return path


def _compiler() -> str | None:
    """The C compiler tinygrad's CPU device will run: CC if set, else the first clang found, else
    zig's clang from the ziglang package."""
    if os.environ.get("CC"):
        return os.environ["CC"]
    return next((c for c in _CLANGS if shutil.which(c)), None) or _zig_cc()


# before tinygrad reads CC (its getenv is cached on first use)
_CC = _compiler()
if "CC" not in os.environ and _CC is not None and _CC != "clang":
    os.environ["CC"] = _CC

from tinygrad import Tensor, dtypes  # noqa: E402  (CC first, above)
from tinygrad.helpers import DEV, EMULATED_DTYPES  # noqa: E402

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities  # noqa: E402
from gpt2_conformance.api.validation import check_tables  # noqa: E402
from gpt2_conformance.backends.thirdparty.tinygrad_gpt2.model import GPT2Embedding  # noqa: E402

DEVICE = "CPU"
DEV.value = DEVICE  # tinygrad's default device: nn.Embedding builds its arange there
# bfloat16 as tinygrad's own software bfloat16 on every machine (the module docstring says why)
EMULATED_DTYPES.value = "bfloat16"
TINYGRAD_DTYPES = {"float32": dtypes.float32, "float16": dtypes.float16, "bfloat16": dtypes.bfloat16}


def from_numpy(a) -> Tensor:
    """The same values and dtype as a tinygrad Tensor on the CPU device (a C-ordered copy)."""
    return Tensor(np.array(a, order="C", copy=True), device=DEVICE)


def to_numpy(t: Tensor) -> np.ndarray:
    """The tensor's values as the model's output holds them: realised first, in its own dtype, then
    read back (a bfloat16 one upcast to float32 after it is stored, which is exact: a cast fused
    into the kernel that computes the sum would skip the sum's rounding to bfloat16)."""
    t = t.realize()
    if t.dtype == dtypes.bfloat16:
        t = t.cast(dtypes.float32).realize()  # numpy has no bfloat16; the upcast is exact
    return np.array(t.numpy(), copy=True)


def _offset(past_length):
    """A numpy integer (a scalar or a 0-d array) as the Python int the example's start_pos is
    (tinygrad cannot make a constant of either); anything else, bools and floats included, goes to
    tinygrad as it is."""
    if isinstance(past_length, np.integer | np.ndarray) and past_length.ndim == 0:
        if np.issubdtype(past_length.dtype, np.integer):
            return int(past_length)
    return past_length


class TinygradGPT2Adapter(Adapter):
    capabilities = Capabilities(
        dtypes=tuple(TINYGRAD_DTYPES),
        devices=("cpu",),
        gradients=True,
        black_box="h = wte(tokens) + wpe(allpos.shrink(start_pos..)) as tinygrad's examples/gpt2.py (ours, "
        "model.py); offset = the example's start_pos; logits = tied lm_head(h)",
    )

    @classmethod
    def implementation(cls) -> str:
        return f"ours, written as tinygrad's examples/gpt2.py, on tinygrad {version('tinygrad')} (CPU device, clang)"

    @classmethod
    def device_available(cls, device: str) -> tuple[bool, str]:
        if device != "cpu":
            return False, f"{cls.__name__} claims only cpu"
        if _compiler() is None:
            return False, (
                "tinygrad's CPU device compiles C with clang: no clang is on PATH, CC is not set, and the "
                "ziglang package (zig's clang, in the tinygrad extra) is not installed"
            )
        return True, ""

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.dtype = self.framework_dtype(TINYGRAD_DTYPES)
        self.model = GPT2Embedding(config.n_embd, DEVICE, self.dtype)

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        # the arrays as they are (their shapes judged by tinygrad's load_state_dict), rounded to the
        # adapter's dtype as the example's FP16 load casts its weights
        self.model.load(from_numpy(wte), from_numpy(wpe))

    def tables(self):
        return to_numpy(self.model.wte.weight), to_numpy(self.model.wpe.weight)

    def init_tables(self, seed):
        Tensor.manual_seed(seed)
        self.model = GPT2Embedding(self.config.n_embd, DEVICE, self.dtype)  # nn.Embedding's own init

    def assign_wte_row(self, index, values):
        # tinygrad's __setitem__ on a realised tensor: an in-place assign of that row, which the
        # head (the same tensor) reads too
        row = from_numpy(np.asarray(values, np.float32)).cast(self.dtype)
        self.model.wte.weight[index] = row
        self.model.wte.weight.realize()

    def parameters(self):
        # lm_head.weight is wte.weight (model.py): one parameter, listed once
        return {"wte.weight": tuple(self.model.wte.weight.shape), "wpe.weight": tuple(self.model.wpe.weight.shape)}

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        return to_numpy(self.model.embed(from_numpy(ids), _offset(past_length)))

    def logits(self, h_final):
        # a bfloat16 adapter gets float32 arrays holding bfloat16 values: hand the head its dtype
        h = from_numpy(np.asarray(h_final)).cast(self.dtype)
        return to_numpy(self.model.head(h))

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        wte, wpe = self.model.wte.weight.detach(), self.model.wpe.weight.detach()
        wte.requires_grad = wpe.requires_grad = True
        saved = (self.model.wte.weight, self.model.wpe.weight)
        self.model.wte.weight, self.model.wpe.weight, self.model.lm_head.weight = wte, wpe, wte
        try:
            h = self.model.embed(from_numpy(ids), _offset(past_length))
            logits = self.model.head(h)
            cot_h = from_numpy(cotangent_h).cast(self.dtype)
            cot_l = from_numpy(cotangent_logits).cast(self.dtype)
            loss = (cot_h * h).sum() + (cot_l * logits).sum()
            loss.backward()
            assert wte.grad is not None and wpe.grad is not None  # both reach the loss
            return to_numpy(wte.grad.cast(dtypes.float32)), to_numpy(wpe.grad.cast(dtypes.float32))
        finally:
            self.model.wte.weight, self.model.wpe.weight = saved
            self.model.lm_head.weight = saved[0]
