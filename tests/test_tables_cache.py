"""The suite's random tables (conformance/runtime/tables.py) are drawn once and kept on disk for
the next process: what a process reads back must be exactly what the seed draws, and a file
that is not (truncated, another draw, another shape) is drawn again, never used."""

import os
import tempfile

import numpy as np
import pytest

from gpt2_conformance.api import gpt2, machine
from gpt2_conformance.runtime import tables

D = 64  # any width: the cache is per width


@pytest.fixture
def private_temp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tables.random_tables.cache_clear()
    tables.rounded_tables.cache_clear()
    yield tmp_path / f"gpt2-conformance-{os.getuid()}" / "tables"
    tables.random_tables.cache_clear()
    tables.rounded_tables.cache_clear()


def _files(folder):
    return sorted(folder.glob("w*.npy"))


def test_a_later_process_reads_exactly_what_the_seed_draws(private_temp):
    drawn = tables.random_tables(D)
    assert [f.name.split("-")[0] for f in _files(private_temp)] == ["wpe", "wte"]
    tables.random_tables.cache_clear()  # as a new process
    read = tables.random_tables(D)
    assert read[0].base is not None and drawn[0] is not read[0]  # memory-mapped from the file
    for got, want in zip(read, tables._draw(D, tables.TABLE_SEED), strict=True):
        assert got.dtype == np.float32 and not got.flags.writeable
        assert np.array_equal(got, want)


@pytest.mark.parametrize("damage", ["truncated", "another seed's values", "another width"])
def test_a_file_that_is_not_the_seeds_draw_is_drawn_again(private_temp, damage):
    tables.random_tables(D)
    wte_file = next(f for f in _files(private_temp) if f.name.startswith("wte"))
    if damage == "truncated":
        wte_file.write_bytes(wte_file.read_bytes()[:1000])
    elif damage == "another seed's values":
        np.save(wte_file, tables._draw(D, tables.TABLE_SEED + 1)[0])
    else:
        np.save(wte_file, tables._draw(D + 1, tables.TABLE_SEED)[0])
    tables.random_tables.cache_clear()
    got = tables.random_tables(D)
    assert np.array_equal(got[0], tables._draw(D, tables.TABLE_SEED)[0]), damage
    tables.random_tables.cache_clear()  # and the file was written again, right this time
    assert np.array_equal(
        tables._read(
            [str(f) for f in (wte_file, wte_file.with_name(wte_file.name.replace("wte", "wpe")))],
            D,
            tables._first_values(tables.TABLE_SEED),
        )[0],
        got[0],
    )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rounded_tables_are_kept_the_same_way(private_temp, dtype):
    """The DTYPE clauses' rounded tables: made from the seed's tables, kept on disk, read back
    exactly; a file holding another rounding is made again."""
    from gpt2_conformance.runtime.numerics import round_to_dtype

    want = [round_to_dtype(t, dtype) for t in tables._draw(D, tables.TABLE_SEED)]
    made = tables.rounded_tables(D, dtype)
    tables.rounded_tables.cache_clear()  # as a new process
    read = tables.rounded_tables(D, dtype)
    assert read[0].base is not None and not read[0].flags.writeable
    for got, expected in zip(read, want, strict=True):
        assert np.array_equal(got, expected) and np.array_equal(made[0][:1], want[0][:1])
    other = "bfloat16" if dtype == "float16" else "float16"
    wte_file = next(f for f in _files(private_temp) if f.name.startswith("wte") and dtype in f.name)
    np.save(
        wte_file,
        round_to_dtype(want[0], other) if other == "bfloat16" else want[0].astype(np.float16).astype(np.float32),
    )
    tables.rounded_tables.cache_clear()
    assert np.array_equal(tables.rounded_tables(D, dtype)[0], want[0])


def test_a_folder_others_may_write_into_is_not_read(private_temp):
    tables.random_tables(D)
    os.chmod(private_temp, 0o777)
    try:
        tables.random_tables.cache_clear()
        got = tables.random_tables(D)
        assert got[0].base is None  # drawn in memory, not read from that folder
    finally:
        os.chmod(private_temp, 0o700)


def test_without_posix_owners_the_tables_are_drawn_in_memory(private_temp, monkeypatch):
    """Windows has no os.getuid: no private folder can be checked, so nothing is kept on disk."""
    from gpt2_conformance.api import machine

    monkeypatch.delattr(os, "getuid")
    assert machine.private_cache_folder("tables") is None
    got = tables.random_tables(D)
    assert got[0].base is None and np.array_equal(got[0], tables._draw(D, tables.TABLE_SEED)[0])
    assert not private_temp.exists()


def test_a_cache_file_is_replaced_whole_or_not_at_all(tmp_path):
    """machine.replace_atomically, the one way the tables, the report's distribution map and the
    ONNX export reach their cache: the file appears whole; a write that raises, or a folder that
    is gone, leaves the old file (or none) and no temporary file behind."""
    target = tmp_path / "kept.bin"
    assert machine.replace_atomically(str(target), lambda f: f.write(b"first"))
    assert target.read_bytes() == b"first"

    def half_then_fail(f):
        f.write(b"half")
        raise TypeError("not serializable")

    with pytest.raises(TypeError, match="not serializable"):
        machine.replace_atomically(str(target), half_then_fail)
    assert target.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == ["kept.bin"]
    assert machine.replace_atomically(str(tmp_path / "gone" / "kept.bin"), lambda f: f.write(b"x")) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.bin"]


def test_the_golden_stand_in_is_kept_the_same_way(private_temp):
    """The GOLDEN clauses' wte (the suite's wte with every known real value written in): read
    back exactly what golden/data.standin_wte makes; a wte other than the suite's is not kept."""
    from gpt2_conformance.golden import data

    golden = data.load()
    fill = tables.random_tables(gpt2.N_EMBD_SMALL)[0]
    made = tables.golden_standin_wte(golden, fill)
    tables.random_tables.cache_clear()  # as a new process
    fill = tables.random_tables(gpt2.N_EMBD_SMALL)[0]
    read = tables.golden_standin_wte(golden, fill)
    assert isinstance(read.base, np.memmap) and not read.flags.writeable
    want = data.standin_wte(golden, fill)
    assert np.array_equal(read, want) and np.array_equal(made, want)
    other = np.zeros_like(fill)
    assert tables.golden_standin_wte(golden, other).base is None  # made in memory
