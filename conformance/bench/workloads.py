"""What the benchmark times, and how many bytes each workload moves.

Byte accounting (float32 unless the dtype says otherwise; s = bytes per element):

forward  h[b, t] = wte[ids[b, t]] + wpe[past + t]
         wte rows read (B*T*d*s) + wpe rows read, counted once per token as openai/gpt-2's
         expand_tile gathers them (B*T*d*s) + h written (B*T*d*s) = 3*B*T*d*s.
         At B=8, T=1024, d=768 that is 75.5 MB (the figure in issue 6). The ids (4 bytes per
         token) are left out: 0.03 MB at that shape.
backward dwte = scatter-add of dh into a dense [V, d] gradient, dwpe = sum over the batch:
         dh read twice (2*B*T*d*s) + both dense gradients written once ((V + C)*d*s).
         The dense [V, d] write dominates at every shape (154 MB at d=768).
logits   h [B, T, d] @ wte^T: wte read (V*d*s) + h read (B*T*d*s) + logits written (B*T*V*s);
         also 2*B*T*d*V flops. At decode shapes it is bandwidth-bound (wte is read whole for
         a handful of rows); at prefill shapes it is compute-bound, so "% of the bandwidth
         limit" is low there by nature and GFLOP/s is the figure to read.

cache    "warm": the same call repeated (the issue's bar is judged warm); "cold": the caches
         emptied before each timed call (conformance/bench/cache.py says why both). The bar
         shape is timed both ways.
"""

from __future__ import annotations

import ast
import os
from dataclasses import asdict, dataclass

from conformance import gpt2

KINDS = ("forward", "backward", "logits")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
BAR_SHAPE = ("forward", 8, 1024, 768)  # the shape issue 6 sets the 2/3 (best: 85%) bar at
BAR_FRACTION, BEST_FRACTION = 2 / 3, 0.85


@dataclass(frozen=True)
class Workload:
    kind: str  # forward | backward | logits
    phase: str  # prefill | decode
    batch: int
    seq: int
    n_embd: int
    past_length: int = 0
    dtype: str = "float32"
    cache: str = "warm"  # warm | cold

    @property
    def name(self) -> str:
        return f"{self.kind}_{self.phase}"

    @property
    def shape_id(self) -> str:
        past = f"-past{self.past_length}" if self.past_length else ""
        cold = "-cold" if self.cache == "cold" else ""
        return f"B{self.batch}-T{self.seq}-d{self.n_embd}{past}{cold}"

    @property
    def is_bar_shape(self) -> bool:
        return (self.kind, self.batch, self.seq, self.n_embd) == BAR_SHAPE and self.dtype == "float32" \
            and self.cache == "warm"

    @property
    def is_cold_bar_shape(self) -> bool:
        return (self.kind, self.batch, self.seq, self.n_embd) == BAR_SHAPE and self.dtype == "float32" \
            and self.cache == "cold"

    def as_dict(self) -> dict:
        return asdict(self)


def bytes_moved(w: Workload) -> int:
    """Bytes the workload must move at least, by the accounting in the module docstring."""
    s = ITEMSIZE[w.dtype]
    tokens = w.batch * w.seq
    if w.kind == "forward":
        return 3 * tokens * w.n_embd * s
    if w.kind == "backward":
        return 2 * tokens * w.n_embd * s + (gpt2.N_VOCAB + gpt2.N_CTX) * w.n_embd * s
    if w.kind == "logits":
        return gpt2.N_VOCAB * w.n_embd * s + tokens * w.n_embd * s + tokens * gpt2.N_VOCAB * s
    raise ValueError(f"unknown workload kind {w.kind!r}")


def flops(w: Workload) -> int:
    """Floating-point operations: the adds of the forward/backward, 2*M*N*K for the logits."""
    tokens = w.batch * w.seq
    if w.kind == "logits":
        return 2 * tokens * w.n_embd * gpt2.N_VOCAB
    return tokens * w.n_embd * (2 if w.kind == "backward" else 1)


def plan(quick: bool = False, sizes: tuple[int, ...] | None = None) -> list[Workload]:
    """The workloads of a run. --quick keeps the bar shape and one of each other kind."""
    decode_past = 512
    cold_bar = Workload("forward", "prefill", 8, 1024, 768, cache="cold")
    if quick:
        return [
            Workload("forward", "prefill", 8, 1024, 768),
            cold_bar,
            Workload("forward", "decode", 1, 1, 768, decode_past),
            Workload("forward", "decode", 64, 1, 768, decode_past),
            Workload("backward", "prefill", 8, 1024, 768),
            Workload("logits", "decode", 1, 1, 768, decode_past),
            Workload("logits", "prefill", 1, 128, 768),
        ]
    sizes = sizes or tuple(gpt2.SIZES.values())
    out = [Workload("forward", "prefill", 8, 1024, d) for d in sizes] + [cold_bar]
    out += [Workload("forward", "decode", b, 1, 768, decode_past) for b in (1, 4, 16, 64)]
    out += [Workload("backward", "prefill", 8, 1024, d) for d in sizes]
    out += [Workload("backward", "decode", 64, 1, 768, decode_past)]
    out += [Workload("logits", "decode", b, 1, 768, decode_past) for b in (1, 8, 64)]
    out += [Workload("logits", "prefill", 1, 1024, 768)]
    return out


def modes_of(backend: str) -> list[str]:
    """The MODES keys of backends/<backend>/bench.py, read without importing the framework
    (the pytest-benchmark suite parametrizes over them at collection time)."""
    import backends

    path = os.path.join(os.path.dirname(backends.__file__), backend, "bench.py")
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MODES" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise LookupError(f"{path} has no MODES")


def applies(backend: str, mode: str, w: Workload) -> bool:
    """Whether a mode times a workload at all (a few modes time one kind only)."""
    if (backend, mode) == ("tensorflow", "pretransposed"):
        return w.kind == "logits"
    if (backend, mode) in {("numpy", "take-out"), ("numpy", "fancy")}:
        return w.kind == "forward"
    if (backend, mode) == ("jax", "nocheck"):
        return w.kind != "logits"
    if (backend, mode) == ("jax", "flag"):
        return w.kind == "forward"
    if (backend, mode) == ("tensorflow", "nocheck"):
        return w.kind == "forward"
    return True
