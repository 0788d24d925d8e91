"""What the benchmark times, and the least bytes each workload must move.

Byte accounting: the least traffic a correct implementation must move between memory and
the cores, so that "% of the limit" is an upper bound (a row above 100% means this model, or
the reference it is divided by, is wrong: summary.py flags it and never shows it as a result).
s = bytes per element (float32 unless the dtype says otherwise); U = distinct token ids in the
call (a row read once serves every token that repeats it; the bench's random ids repeat: 7,5xx
distinct of 8,192 at B=8, T=1024); V = 50257, C = 1024.

forward  h[b, t] = wte[ids[b, t]] + wpe[past + t]
         read U*d*s (wte rows) + T*d*s (wpe rows: each position's row once, shared by the
         batch), write B*T*d*s (h): 53.5 MB at B=8, T=1024, d=768 with all ids distinct.
         The ids themselves are left out: leaving bytes out keeps the percentage a bound.
backward dwte = scatter-add of dh into a dense [V, d] gradient, dwpe = dh summed over the batch
         into a dense [C, d] one: read dh once (B*T*d*s; one pass can feed both sums), write
         both dense gradients ((V + C)*d*s).
logits   h [B, T, d] @ wte^T: read wte (V*d*s) and h (B*T*d*s), write the logits (B*T*V*s);
         also 2*B*T*d*V flops: bandwidth-bound at decode shapes, compute-bound at prefill
         ones (where "% of the limit" is low by nature).
step     one generated token's embedding + tied head (decode, B=1, T=1): read wte whole
         (V*d*s, which holds the gathered row) and the wpe row (T*d*s), write the logits
         (B*T*V*s); h may stay in registers. The forward and the head are timed in one call.

cache    "warm": the same call repeated; "cold": the caches emptied before each timed call
         (conformance/bench/cache.py). Each row's limit is a streaming reference moving the
         same bytes read and written, in the same cache state, timed in the same rounds as the
         row (conformance/bench/bandwidth.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from gpt2_conformance.api import gpt2

KINDS = ("forward", "backward", "logits", "step")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
NAMES = (
    "forward_prefill",
    "forward_decode",
    "backward_prefill",
    "backward_decode",
    "logits_prefill",
    "logits_decode",
    "step_decode",
)
# what users ask about first: a generated token's decode step, and the prefill forward of a
# batch of 8 full contexts (the shape the frameworks have always been compared at here)
QUICK = ("step_decode", "forward_prefill")
DECODE_PAST = 512


@dataclass(frozen=True)
class Workload:
    kind: str  # one of KINDS
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

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def group(self) -> str:
        """pytest-benchmark's group, and the key of this workload's limit in a child's result."""
        return f"{self.name} {self.shape_id}"


def traffic(w: Workload, distinct_ids: int | None = None) -> tuple[int, int]:
    """(bytes read, bytes written) that w must move at least (module docstring).
    distinct_ids: distinct token ids in the call (default B*T: all distinct)."""
    s = ITEMSIZE[w.dtype]
    tokens = w.batch * w.seq
    u = tokens if distinct_ids is None else distinct_ids
    if not 0 <= u <= tokens:
        raise ValueError(f"distinct_ids={distinct_ids}, but should be in [0, B*T={tokens}]")
    d, V, C = w.n_embd, gpt2.N_VOCAB, gpt2.N_CTX
    if w.kind == "forward":
        return (u + w.seq) * d * s, tokens * d * s
    if w.kind == "backward":
        return tokens * d * s, (V + C) * d * s
    if w.kind == "logits":
        return (V + tokens) * d * s, tokens * V * s
    if w.kind == "step":
        return (V + w.seq) * d * s, tokens * V * s
    raise ValueError(f"unknown workload kind {w.kind!r}; known: {', '.join(KINDS)}")


def bytes_moved(w: Workload, distinct_ids: int | None = None) -> int:
    """The least bytes w must move (read + written), by the accounting in the module docstring."""
    return sum(traffic(w, distinct_ids))


def flops(w: Workload) -> int:
    """Floating-point operations: the adds of the forward/backward, 2*M*N*K for the logits."""
    tokens = w.batch * w.seq
    if w.kind == "logits":
        return 2 * tokens * w.n_embd * gpt2.N_VOCAB
    if w.kind == "step":
        return tokens * w.n_embd + 2 * tokens * w.n_embd * gpt2.N_VOCAB
    return tokens * w.n_embd * (2 if w.kind == "backward" else 1)


def plan(quick: bool = False, sizes: tuple[int, ...] | None = None) -> list[Workload]:
    """The workloads of a run: every shape, or with `quick` each workload's standard shape."""
    if quick:
        return [standard(name) for name in QUICK]
    decode_past = DECODE_PAST
    cold_bar = Workload("forward", "prefill", 8, 1024, 768, cache="cold")
    sizes = sizes or tuple(gpt2.SIZES.values())
    out = [Workload("forward", "prefill", 8, 1024, d) for d in sizes] + [cold_bar]
    out += [Workload("forward", "decode", b, 1, 768, decode_past) for b in (1, 4, 16, 64)]
    out += [Workload("backward", "prefill", 8, 1024, d) for d in sizes]
    out += [Workload("backward", "decode", 64, 1, 768, decode_past)]
    out += [Workload("logits", "decode", b, 1, 768, decode_past) for b in (1, 8, 64)]
    out += [Workload("logits", "prefill", 1, 1024, 768)]
    out += [Workload("step", "decode", 1, 1, 768, decode_past)]
    return out


def standard(name: str) -> Workload:
    """The one shape a workload name is timed at by --quick and the gate: GPT-2 small, warm, the
    first shape of the full plan with that name."""
    for w in plan(sizes=(768,)):
        if w.name == name and w.cache == "warm":
            return w
    raise ValueError(f"unknown workload {name!r}; known: {', '.join(NAMES)}")


def step_parts(w: Workload) -> tuple[Workload, Workload]:
    """The forward and the head a decode step is timed as (one call, the two in sequence)."""
    if w.kind != "step":
        raise ValueError(f"step_parts: {w.kind!r} is not a step workload")
    return replace(w, kind="forward"), replace(w, kind="logits")


def modes_of(backend: str) -> list[str]:
    """The bench modes of a backend's registry entry (read without importing the framework: the
    pytest-benchmark suite parametrizes over them at collection time)."""
    from gpt2_conformance import registry

    entry = registry.entry(backend)
    if entry is None or not entry.bench_modes:
        raise LookupError(f"backend {backend!r} has no bench modes of its own in its registry entry")
    return list(entry.bench_modes)


def applies(backend: str, mode: str, w: Workload) -> bool:
    """Whether a mode times a workload at all (its registry entry says which kinds a mode times;
    modes it does not list time every kind). A decode step is the mode's forward then its head,
    so it needs both."""
    if w.kind == "step":
        return all(applies(backend, mode, part) for part in step_parts(w))
    from gpt2_conformance import registry

    entry = registry.entry(backend)
    return entry is None or entry.times(mode, w.kind)
