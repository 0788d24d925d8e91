"""`gpt2-conformance golden --checkpoint PATH [--backend NAME]`.

Reads wte and wpe from a local checkpoint, says for each table whether it is the real GPT-2's
(reference digests; for wpe also the element-wise difference from the shipped real table,
naming the first differing element; for wte also the known real values), then runs the GOLDEN
clauses on the backend with the checkpoint's tables loaded. A table a GGUF stores as F16, BF16,
Q8_0, ... is judged by that type's rounding or error bound instead (dequantised.py).

Exit codes: 0 both tables are the real GPT-2's and every claimed GOLDEN clause passed; 1 a table
differs from the real one, is outside its stored type's rule or cannot be verified, or a GOLDEN
clause failed; 2 bad command line or unreadable checkpoint.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

import numpy as np

from gpt2_conformance.golden import data, dequantised, digests, readers

if TYPE_CHECKING:
    from gpt2_conformance.results import SuiteResult

GROUP = "GOLDEN"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "golden",
        help="check a local GPT-2 checkpoint against the real tables and run the GOLDEN clauses with its tables",
    )
    p.add_argument(
        "--checkpoint",
        required=True,
        help="model.safetensors, pytorch_model.bin, a TF model.ckpt "
        "prefix (or its .index / folder), .npz, or llama.cpp .gguf",
    )
    p.add_argument("--backend", default="numpy", help="backend to run the GOLDEN clauses on (default numpy)")
    p.add_argument("--adapter", help="adapter factory as package.module:factory (instead of --backend)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--digests-only", action="store_true", help="check the tables, do not run the clauses")


def _known_values(wte: np.ndarray, golden: data.Golden) -> tuple[int, str]:
    """(number of known real wte values the table misses, the first one, described)."""
    misses = []
    for k in golden.wte_known:
        got = wte[k.row, k.col]
        ok = got.view(np.uint32) == k.value.view(np.uint32) if k.exact else abs(float(got) - float(k.text)) <= k.abs_tol
        if not ok:
            misses.append((k, got))
    if not misses:
        return 0, ""
    k, got = misses[0]
    precision = "exactly" if k.exact else f"+- {k.abs_tol:.2g}"
    return len(misses), f"first wte[{k.row}, {k.col}] = {float(got)!r}, real {k.text} {precision}"


def check_tables(ckpt: readers.Checkpoint, golden: data.Golden) -> tuple[dict[str, bool | None], list[str]]:
    """{table: matches the real GPT-2 (None: no rule for the type it is stored as)} and the report lines."""
    refs = golden.reference_digests.get(ckpt.size)
    if refs is None:
        return {}, [f"  cannot verify: no reference digests for GPT-2 {ckpt.size} tables (only 124M has them)"]
    lines, verdict = [], {}
    for name, table in (("wpe", ckpt.wpe), ("wte", ckpt.wte)):
        stored = ckpt.stored_dtype(name)
        if stored != "float32":  # a GGUF's F16/BF16/Q8_0/...: judged by its rounding or bound, not digests
            verdict[name], more = (
                dequantised.judge_wpe(table, stored, golden.wpe)
                if name == "wpe"
                else dequantised.judge_wte(table, stored, golden.wte_known)
            )
            lines += more
            continue
        ref = refs[name]
        sha, crc = digests.sha256(table), digests.tf_masked_crc32c(table)
        ok = sha == ref["sha256"]["value"] and crc == ref["tf_masked_crc32c"]["value"]
        verdict[name] = ok
        head = "MATCHES the real GPT-2 124M" if ok else "DOES NOT MATCH the real GPT-2 124M"
        lines.append(
            f"  {name}  {head} {name}: sha256 {sha[:16]}... "
            f"({'=' if sha == ref['sha256']['value'] else '!='} {ref['sha256']['value'][:16]}...), "
            f"TF masked crc32c {crc} ({'=' if crc == ref['tf_masked_crc32c']['value'] else '!='} "
            f"{ref['tf_masked_crc32c']['value']})"
        )
        if name == "wpe":
            lines.append(f"        {digests.compare(table, golden.wpe).describe('wpe')}")
        else:
            missed, first = _known_values(table, golden)
            n = len(golden.wte_known)
            lines.append(
                f"        {n - missed} of {n} known real wte values agree at their precision"
                + (f"; {missed} do not ({first})" if missed else "")
            )
            if "crc32_bigendian" in ref:
                be = f"{__import__('zlib').crc32(np.ascontiguousarray(table, '>f4').tobytes()):08x}"
                lines.append(
                    f"        CRC-32 of the big-endian bytes {be} "
                    f"({'=' if be == ref['crc32_bigendian']['value'] else '!='} "
                    f"{ref['crc32_bigendian']['value']}; {ref['crc32_bigendian']['status']})"
                )
    return verdict, lines


def _run_clauses(args) -> SuiteResult:
    from gpt2_conformance.run import runner

    name = args.adapter or args.backend
    result = runner.run_backend(
        name,
        args.device,
        adapter_spec=args.adapter,
        checkpoint=args.checkpoint,
        extra_args=["-k", "test_golden", "--tb=no"],
    )
    return dataclasses.replace(result, clauses=[c for c in result.clauses if c.clause.group == GROUP])


def run(args) -> int:
    try:
        ckpt = readers.load_checkpoint(args.checkpoint)
    except readers.CheckpointError as exc:
        print(f"gpt2-conformance golden: error: {exc}", file=sys.stderr)
        return 2
    golden = data.load()
    print(f"gpt2-conformance golden: {ckpt.describe()}")
    verdict, lines = check_tables(ckpt, golden)
    print("\n".join(lines), flush=True)
    tables_ok = bool(verdict) and all(verdict.values())
    if args.digests_only:
        return 0 if tables_ok else 1
    from gpt2_conformance import registry
    from gpt2_conformance.run import report

    try:
        registry.resolve(args.adapter or args.backend)
    except (ImportError, LookupError, ValueError, TypeError) as exc:
        print(f"gpt2-conformance golden: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"GOLDEN clauses on {args.adapter or args.backend} with the checkpoint's tables "
        f"(golden data: {data.describe(args.checkpoint)}):",
        flush=True,
    )
    if ckpt.dequantised:
        print(
            f"  note: {' and '.join(ckpt.dequantised)} loaded as their dequantised float32 values: "
            "GOLDEN-WPE-ROWS and GOLDEN-H compare with the real float32 values and fail unless those are "
            "bit-exact; GOLDEN-TABLES-ROUNDTRIP, -DECODE and -LOGITS check the implementation with the "
            "tables it is given",
            flush=True,
        )
    result = _run_clauses(args)
    print(report.scorecard(result), flush=True)
    return 0 if tables_ok and not result.error and not result.failed() else 1


def main(argv: list[str] | None = None) -> int:
    """`python -m gpt2_conformance.golden.command --checkpoint PATH` (the same as the subcommand)."""
    import argparse

    parser = argparse.ArgumentParser(prog="gpt2-conformance")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(["golden", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
