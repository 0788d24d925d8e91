"""run/memory.py: the suite's child processes keep freed blocks in the heap (a user's own setting
wins), and the setting really reaches glibc in a child."""

import os
import subprocess
import sys

from gpt2_conformance.run import memory


def test_child_env_adds_the_thresholds_and_keeps_a_users_own():
    env = memory.child_env({"PATH": "/bin"})
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(4 << 30) and env["PATH"] == "/bin"
    assert memory.child_env({"MALLOC_MMAP_THRESHOLD_": "65536"})["MALLOC_MMAP_THRESHOLD_"] == "65536"


def test_runner_children_get_it(monkeypatch):
    from gpt2_conformance.run import runner

    seen = {}

    class Stop(Exception):
        pass

    def fake_popen(cmd, stdout, stderr, text, env):
        seen.update(env)
        raise Stop

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(runner.subprocess, "Popen", fake_popen)
    try:
        runner.run_backend("numpy")
    except Stop:
        pass
    assert seen.get("MALLOC_MMAP_THRESHOLD_") == str(memory.THRESHOLD_BYTES), sorted(seen)


MMAPPED_BYTES = """
import ctypes
class Info(ctypes.Structure):  # glibc's struct mallinfo2 (malloc.h): ten size_t fields
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks "
                                               "fordblks keepcost").split()]
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes, libc.mallinfo2.restype = ctypes.c_void_p, [ctypes.c_size_t], Info
block = libc.malloc(200 << 20)
print(libc.mallinfo2().hblkhd)
"""


def _mmapped_bytes(env) -> int:
    out = subprocess.run([sys.executable, "-c", MMAPPED_BYTES], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_a_table_sized_block_comes_from_the_heap_in_a_child():
    """With the setting, a 200 MB block is served from the heap (kept when freed); glibc's default
    maps it on its own (mmap threshold at most 32 MiB), to be unmapped when freed."""
    plain = {k: v for k, v in os.environ.items() if k not in memory.CHILD_ENV}
    assert _mmapped_bytes(plain) >= 200 << 20
    assert _mmapped_bytes(memory.child_env(plain)) == 0


def test_a_failed_suite_tests_frames_are_freed_before_the_next_test():
    """The suite's hook frees what a failed test's traceback frames hold (a reference cycle) before
    the next test, not whenever the cyclic collector would run (disabled here, so only the hook can
    free it; without its collection the array is still alive at the next call)."""
    import gc

    from gpt2_conformance.run.runner import run_in_process
    from helpers.bad_adapters import FailsHoldingAnArray

    cases = ["test_lookup.py::test_zero_tables_give_zero", "test_lookup.py::test_exact_sum_in_every_layout[C]"]
    FailsHoldingAnArray.held.clear()
    FailsHoldingAnArray.alive_at_call.clear()
    gc.disable()
    try:
        result = run_in_process(
            FailsHoldingAnArray, "fails-holding", extra_args=[a for c in cases for a in ("--gpt2c-case", c)]
        )
    finally:
        gc.enable()
    assert sorted(result.failed()) == ["LOOKUP-EXACT", "LOOKUP-NO-EXTRA"]
    assert FailsHoldingAnArray.alive_at_call == [0, 0], FailsHoldingAnArray.alive_at_call
    assert gc.get_freeze_count() == 0  # the run froze what it imported (hooks.pytest_collection_finish), and thawed it


HUGE_PAGES = "from numpy._core.multiarray import _get_madvise_hugepage; print(_get_madvise_hugepage())"


def test_numpy_in_a_child_touches_fresh_memory_in_small_pages():
    """A suite child's numpy does not ask for huge pages (run/memory.py: each one costs a host fault
    on a VM that reports free memory); a user's own NUMPY_MADVISE_HUGEPAGE wins."""
    plain = {k: v for k, v in os.environ.items() if k not in memory.CHILD_ENV}

    def huge_pages(env) -> str:
        out = subprocess.run([sys.executable, "-c", HUGE_PAGES], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert huge_pages(memory.child_env(plain)) == "False"
    assert huge_pages(memory.child_env({**plain, "NUMPY_MADVISE_HUGEPAGE": "1"})) == "True"


def test_keep_freed_memory_turns_them_off_in_this_process():
    """What tests/conftest.py calls for the project's own test processes, in a plain process."""
    plain = {k: v for k, v in os.environ.items() if k not in memory.CHILD_ENV}
    code = "from gpt2_conformance.run import memory; memory.keep_freed_memory(); " + HUGE_PAGES
    out = subprocess.run([sys.executable, "-c", code], env=plain, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "False", (out.stdout, out.stderr)


def test_a_framework_imported_by_a_suite_test_is_frozen_after_it():
    """An adapter that imports its framework when it is first built (keras-hub's): after that test,
    the suite moves the framework out of the cyclic collector's way too, as it did at collection
    (hooks.pytest_runtest_logfinish), so later collections do not walk it; at the end it is thawed."""
    import gc
    import sys

    from gpt2_conformance.run.runner import run_in_process
    from helpers.bad_adapters import ImportsAFrameworkWhenBuilt

    cases = [
        "test_lookup.py::test_exact_sum_in_every_layout[C]",
        "test_lookup.py::test_batch_rows_independent[past_length 0]",
    ]
    ImportsAFrameworkWhenBuilt.frozen_at_call.clear()
    try:
        result = run_in_process(
            ImportsAFrameworkWhenBuilt,
            "imports-a-framework",
            extra_args=[a for c in cases for a in ("--gpt2c-case", c)],
        )
    finally:
        framework = [name for name in sys.modules if name.startswith("gpt2c_test_framework_")]
        for name in framework:
            del sys.modules[name]
    assert result.error == "" and len(framework) == ImportsAFrameworkWhenBuilt.FRAMEWORK_MODULES
    first, last = ImportsAFrameworkWhenBuilt.frozen_at_call[0], ImportsAFrameworkWhenBuilt.frozen_at_call[-1]
    # each module: itself, its dict, its list and 100 lists
    assert last - first >= 103 * ImportsAFrameworkWhenBuilt.FRAMEWORK_MODULES, (first, last)
    assert gc.get_freeze_count() == 0
