"""The shipped golden data (fixtures/, made by fixtures/derive.py) and the golden tables.

Nothing here reads ../shared: the suite runs on what fixtures/ ships. The fixtures are found
in conformance/golden/fixtures (if packaged there), else in the repository's fixtures/, or
where $GPT2C_FIXTURES points. Their sha256 values are checked against MANIFEST.json on load.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass

import numpy as np

from gpt2_conformance.api import gpt2

WPE_FILE = "gpt2_124M_wpe_float32_le.bin"
GOLDEN_FILE = "golden.json"
GOLDEN_SIZE = "124M"  # the only size with golden values


def fixtures_dir() -> str:
    """$GPT2C_FIXTURES when set (and then only there: an explicit choice is never replaced by
    another copy), else the package's own (the wheel ships them), else the repository's."""
    here = os.path.dirname(os.path.abspath(__file__))
    chosen = os.environ.get("GPT2C_FIXTURES", "")
    candidates = (
        [chosen]
        if chosen
        else [os.path.join(here, "fixtures"), os.path.join(os.path.dirname(os.path.dirname(here)), "fixtures")]
    )
    for path in candidates:
        if os.path.isfile(os.path.join(path, "MANIFEST.json")):
            return path
    raise FileNotFoundError(
        f"GOLDEN fixtures not found (no MANIFEST.json in {', '.join(candidates)})"
        + (
            "; GPT2C_FIXTURES names that folder"
            if chosen
            else "; set GPT2C_FIXTURES to the folder holding MANIFEST.json"
        )
    )


@dataclass(frozen=True)
class Known:
    """One element of a real table, known to abs_tol (0: the exact float32)."""

    row: int
    col: int
    text: str  # as the source printed it
    value: np.float32  # the float32 nearest the printed text (exact when abs_tol == 0)
    abs_tol: float
    sources: tuple[str, ...]

    @property
    def exact(self) -> bool:
        return self.abs_tol == 0


@dataclass(frozen=True)
class GoldenH:
    sequence: str
    past_length: int
    t: int
    col: int
    token_id: int
    position: int
    value: float  # float32 value when exact, else the float64 golden value
    abs_tol: float

    @property
    def exact(self) -> bool:
        return self.abs_tol == 0


@dataclass(frozen=True)
class Sequence:
    name: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    offsets: tuple[int, ...]
    h_golden: bool  # golden h exists (its wte values are known)


@dataclass(frozen=True)
class Golden:
    wpe: np.ndarray  # the real wpe, read-only
    wte_known: tuple[Known, ...]
    wpe_printed: tuple[Known, ...]
    sequences: tuple[Sequence, ...]
    h: tuple[GoldenH, ...]
    reference_digests: dict
    sources: dict
    directory: str

    def sequence(self, name: str) -> Sequence:
        return next(s for s in self.sequences if s.name == name)

    def h_for(self, sequence: str, past_length: int) -> list[GoldenH]:
        return [g for g in self.h if g.sequence == sequence and g.past_length == past_length]

    def describe(self) -> str:
        """One line for reports, with no path of this machine in it (reports are published)."""
        where = "shipped fixtures" if not os.environ.get("GPT2C_FIXTURES") else "fixtures from $GPT2C_FIXTURES"
        return (
            f"{where} (sha256 {self.reference_digests['124M']['wpe']['sha256']['value'][:12]}... of the real "
            f"GPT-2 124M wpe) and {len(self.wte_known)} known real wte values; other wte elements are a seeded "
            "stand-in, never compared"
        )


def _from_hex(text: str) -> np.float32:
    return np.uint32(int(text, 16)).view(np.float32)


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@functools.lru_cache(maxsize=1)
def load() -> Golden:
    directory = fixtures_dir()
    with open(os.path.join(directory, "MANIFEST.json"), encoding="utf-8") as f:
        manifest = {e["file"]: e for e in json.load(f)["files"]}
    for name in (WPE_FILE, GOLDEN_FILE):
        path = os.path.join(directory, name)
        if _sha256(path) != manifest[name]["sha256"]:
            raise ValueError(
                f"{path}: sha256 differs from MANIFEST.json (a corrupted or edited fixture; "
                "regenerate with fixtures/derive.py)"
            )
    wpe = (
        np.fromfile(os.path.join(directory, WPE_FILE), "<f4").reshape(gpt2.N_CTX, gpt2.N_EMBD_SMALL).astype(np.float32)
    )
    wpe.flags.writeable = False
    with open(os.path.join(directory, GOLDEN_FILE), encoding="utf-8") as f:
        g = json.load(f)

    def known(e):
        return Known(e["row"], e["col"], e["text"], _from_hex(e["float32_hex"]), e["abs_tol"], tuple(e["sources"]))

    h = tuple(
        GoldenH(
            e["sequence"],
            e["past_length"],
            e["t"],
            e["col"],
            e["id"],
            e["position"],
            float(_from_hex(e["float32_hex"])) if e["exact"] else float(e["value"]),
            e["abs_tol"],
        )
        for e in g["h"]
    )
    seqs = tuple(
        Sequence(s["name"], tuple(s["ids"]), tuple(s["tokens"]), tuple(s["offsets"]), s["h_golden"])
        for s in g["sequences"]
    )
    return Golden(
        wpe,
        tuple(map(known, g["wte_known"])),
        tuple(map(known, g["wpe_printed"])),
        seqs,
        h,
        g["reference_digests"],
        g["sources"],
        directory,
    )


# -- the tables the GOLDEN clauses load ----------------------------------------------------


@dataclass(frozen=True)
class GoldenTables:
    wte: np.ndarray
    wpe: np.ndarray
    size: str  # "124M", ...
    origin: str  # one line: which golden data this is
    golden: Golden  # sequences, golden vectors (these apply to GOLDEN_SIZE only)
    checkpoint: object = None  # readers.Checkpoint when loaded from one

    @property
    def n_embd(self) -> int:
        return self.wpe.shape[1]

    @property
    def has_golden_values(self) -> bool:
        return self.size == GOLDEN_SIZE


def standin_wte(golden: Golden, fill: np.ndarray) -> np.ndarray:
    """`fill` (any float32 [50257, 768]) with every known real wte value written in place."""
    wte = np.array(fill, np.float32, copy=True)
    for k in golden.wte_known:
        wte[k.row, k.col] = k.value
    wte.flags.writeable = False
    return wte


def shipped_tables(fill_wte: np.ndarray, standin=standin_wte) -> GoldenTables:
    """The shipped golden data's tables: `standin(golden, fill_wte)` makes the wte (the suite's
    own keeps it on disk: runtime/tables.py)."""
    golden = load()
    return GoldenTables(standin(golden, fill_wte), golden.wpe, GOLDEN_SIZE, golden.describe(), golden)


def checkpoint_tables(path: str) -> GoldenTables:
    from gpt2_conformance.golden import readers

    ckpt = readers.load_checkpoint(path)
    return GoldenTables(ckpt.wte, ckpt.wpe, ckpt.size, f"checkpoint {ckpt.describe()}", load(), ckpt)


def describe(checkpoint: str | None) -> str:
    """One line for reports, without reading a checkpoint: which golden data a run uses."""
    if checkpoint:  # by its file name: reports are published, the folder is this machine's
        return (
            f"checkpoint {os.path.basename(os.path.normpath(checkpoint))} (its own tables; golden vectors from "
            "the shipped fixtures)"
        )
    try:
        return load().describe()
    except (OSError, ValueError) as exc:
        return f"shipped fixtures unavailable: {exc}"
