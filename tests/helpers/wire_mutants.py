"""Mutants of the C reference client (gpt2_conformance/wire/clients/gpt2_wire.c): each one the same
source with one mistake patched in at build time (the shipped client stays the one users copy),
and the clauses a whole `run --exec` must fail on it, no more and no fewer (tests/test_wire.py;
the matrix is reports/wire.md). Like the Python mutants of tests/helpers/mutants.py, each carries
its TARGETS; EXPECTED adds what follows from the same mistake, with why.

    cd tests && python -m helpers.wire_mutants OUT_DIR    # builds each and prints its --exec line
"""

from __future__ import annotations

import dataclasses
import os
import sys

from gpt2_conformance.wire import build


@dataclasses.dataclass(frozen=True)
class Mutant:
    what: str
    patches: tuple[tuple[str, str], ...]  # (text of gpt2_wire.c, its replacement): each text occurs once
    expected: frozenset[str]  # the clauses a whole run fails
    sanitize: bool = False  # built with AddressSanitizer


TABLE = "(size_t)(N_VOCAB * d) * 4"  # bytes of wte, in the C source's words


def _copy_of_wte(name: str) -> tuple[tuple[str, str], ...]:
    """Patches that keep `name`, a copy of wte, taken whenever the tables are set (zeros at the hello)."""
    return (
        ("static float *wte, *wpe;", f"static float *wte, *wpe, *{name};"),
        (
            "    in[0].data = in[1].data = NULL;",
            "    in[0].data = in[1].data = NULL;\n"
            f"    free({name}); {name} = malloc({TABLE}); memcpy({name}, wte, {TABLE});",
        ),
        (
            "    normals(wpe, N_CTX * d, 0.01);",
            f"    normals(wpe, N_CTX * d, 0.01);\n    memcpy({name}, wte, {TABLE});",
        ),
        (
            "        wpe = calloc((size_t)(N_CTX * d), 4);",
            f"        wpe = calloc((size_t)(N_CTX * d), 4);\n        free({name}); {name} = calloc({TABLE[:-4]}, 4);",
        ),
    )


MUTANTS = {
    "NoBoundsCheck": Mutant(
        "neither the position nor the token id is checked: a bad one reads whatever memory it names (or crashes)",
        (
            ("    if (seq > 0 && past + seq > N_CTX) {", "    if (0) {"),
            ("        if (id < 0 || id >= N_VOCAB)", "        if (0)"),
        ),
        # its targets, and the message clause, whose bad positions and ids now answer (or crash)
        frozenset({"BOUNDS-POSITION", "BOUNDS-TOKEN", "BOUNDS-MESSAGE"}),
    ),
    "PositionsIgnorePast": Mutant(
        "h reads wpe[t], not wpe[past_length + t] (its gradients keep the right rows)",
        (
            (
                "const float *row = wte + token(ids, i) * d, *pos = wpe + (past + i % seq) * d;",
                "const float *row = wte + token(ids, i) * d, *pos = wpe + (i % seq) * d;",
            ),
        ),
        # as the Python NoCacheOffset: every cached call compared with the full forward, T = 1 at
        # past_length 1023 (LAST-POSITION), the golden clauses at cached offsets
        frozenset(
            {
                "BOUNDS-LAST-POSITION",
                "GOLDEN-DECODE",
                "GOLDEN-H",
                "GOLDEN-WPE-ROWS",
                "POSITIONS-CHUNKED",
                "POSITIONS-DECODE",
                "POSITIONS-OFFSET",
            }
        ),
    ),
    "OutputBias": Mutant(
        "the head adds a bias [V] (a parameter, listed as one)",
        (
            (
                "out_[i * N_VOCAB + r] = dot(h + i * d, wte + r * d, d);",
                "out_[i * N_VOCAB + r] = dot(h + i * d, wte + r * d, d) + 0.02f * (float)(r % 7 - 3);",
            ),
            ('"{\\"ok\\":true,\\"parameters\\":{\\"wte', '"{\\"ok\\":true,\\"parameters\\":{\\"bias\\":[50257],\\"wte'),
        ),
        # its targets (TIED-NO-BIAS, SHAPE-PARAMS); the float32 bounds of the head (TIED-LOGITS-FLOAT32,
        # GOLDEN-LOGITS); not TIED-LOGITS, whose structural bound (inputs rounded to bfloat16) holds a
        # bias of at most 0.06 on its inputs, unlike the Python OutputBias's N(0, 0.02^2) one
        frozenset({"GOLDEN-LOGITS", "SHAPE-PARAMS", "TIED-LOGITS-FLOAT32", "TIED-NO-BIAS"}),
    ),
    "CopiedHead": Mutant(
        "the head multiplies by a copy of wte taken when the tables are set: stale after assign_wte_row",
        (*_copy_of_wte("head"), ("dot(h + i * d, wte + r * d, d)", "dot(h + i * d, head + r * d, d)")),
        # only its target: STATE-UPDATES-SEEN's calls after an update are embed's, which reads wte itself
        frozenset({"TIED-STORAGE"}),
    ),
    "StaleRowAfterUpdate": Mutant(
        "embed gathers from a copy of wte taken when the tables are set: an assigned row is not seen by h",
        (
            *_copy_of_wte("gather"),
            ("const float *row = wte + token(ids, i) * d, *pos", "const float *row = gather + token(ids, i) * d, *pos"),
        ),
        # as the Python GatherTableNotRefreshed: only the clause that updates a row after reading it
        frozenset({"STATE-UPDATES-SEEN"}),
    ),
    "ReadPastTheTable": Mutant(
        "the token check lets id 50257 through (> for >=), and its tables are read into its own heap "
        "memory (no mapping): the row after the last is read, which AddressSanitizer stops",
        (
            ("        if (id < 0 || id >= N_VOCAB)", "        if (id < 0 || id > N_VOCAB)"),
            (
                "        a->data = mmap(NULL, a->nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);\n"
                "        close(fd);\n"
                "        a->mapped = a->data != MAP_FAILED;\n"
                "        return a->mapped ? 0 : -1;",
                "        a->data = malloc(a->nbytes);\n"
                "        int bad = !a->data || read_exact(fd, a->data, a->nbytes);\n"
                "        close(fd);\n"
                "        return bad ? -1 : 0;",
            ),
        ),
        # id 50257 (the padded vocabulary's first row) crashes the process in BOUNDS-TOKEN's sentinel cases and
        # BOUNDS-MESSAGE's token-high case: a crash is no raise
        frozenset({"BOUNDS-TOKEN", "BOUNDS-MESSAGE"}),
        sanitize=True,
    ),
}


def source(name: str) -> str:
    """The C client with the mutant's patches applied (each text must occur exactly once)."""
    with open(build.source("c"), encoding="utf-8") as f:
        text = f.read()
    for old, new in MUTANTS[name].patches:
        if text.count(old) != 1:
            raise ValueError(f"{name}: {old!r} occurs {text.count(old)} times in gpt2_wire.c, not once")
        text = text.replace(old, new)
    return text


def build_mutant(name: str, folder: str) -> list[str]:
    """The mutant built in `folder`; the argv that runs it (an ASan build does not look for leaks at
    exit, which is not its mistake)."""
    mutant = MUTANTS[name]
    argv = build.build("c", folder, text=source(name), sanitize=mutant.sanitize)
    return ["env", "ASAN_OPTIONS=detect_leaks=0", *argv] if mutant.sanitize else argv


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "wire-mutants"
    for mutant_name in MUTANTS:
        print(mutant_name, " ".join(build_mutant(mutant_name, os.path.join(out, mutant_name))))
