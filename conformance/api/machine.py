"""Facts about the machine this process runs on, shared by adapters and the bench."""

from __future__ import annotations

import contextlib
import glob
import mmap
import os
import tempfile
from collections.abc import Callable
from typing import BinaryIO

import numpy as np


def cores() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


SYSFS_CACHE = "/sys/devices/system/cpu/cpu0/cache"


def _parse_size(text: str) -> int:
    """sysfs writes sizes as "480M", "2048K" or plain bytes."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def llc_bytes(root: str = SYSFS_CACHE) -> int | None:
    """Size of the highest-level data (or unified) cache cpu0 sees, or None where sysfs has
    no cache information (not Linux, some containers)."""
    best = None
    for index in glob.glob(os.path.join(root, "index*")):
        try:
            with open(os.path.join(index, "level")) as f:
                level = int(f.read())
            with open(os.path.join(index, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(index, "size")) as f:
                size = _parse_size(f.read())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and (best is None or level > best[0]):
            best = (level, size)
    return None if best is None else best[1]


def available_memory_bytes() -> int | None:
    """Memory the kernel could give this process without swapping (MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return None


# The thread pools of numpy's BLAS and of torch (OpenMP). Each sizes itself to every core, so N
# processes at once on the same cores each spin N times too many threads against the others.
THREAD_POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def threads() -> int:
    """Threads this process's own pools should run: OMP_NUM_THREADS where it is a positive
    integer (thread_pools_for gives each of N processes at once its share that way), else
    cores(). For engines that take a thread count (CTranslate2, llama.cpp) rather than read
    the variable themselves."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else cores()


def thread_pools_for(processes: int) -> dict[str, str]:
    """Environment variables that give each of `processes` processes running at once its share
    of the cores (at least one thread); empty for one process. A caller sets them where not
    already set: a user's own setting wins."""
    if processes <= 1:
        return {}
    threads = str(max(1, cores() // processes))
    return {name: threads for name in THREAD_POOL_VARIABLES}


def zero_table(shape: tuple[int, ...], dtype) -> np.ndarray:
    """A read-only C-contiguous array of zeros that takes no memory: a private read-only mapping
    of no file, whose pages all read the kernel's one zero page. np.zeros would hand a process
    that keeps freed memory in its heap (run/memory.py) used pages to clear, and memory a
    process has not touched before is what a suite run spends most on (on virtual machines that
    give freed pages back to their host: reports/performance.md). np.zeros where there is no mmap
    flag for it (Windows)."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    if size == 0 or not hasattr(mmap, "MAP_PRIVATE"):
        out = np.zeros(shape, dtype)
        out.flags.writeable = False
        return out
    pages = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    return np.frombuffer(pages, dtype).reshape(shape)  # read-only: the buffer is


def immutable(array: np.ndarray) -> bool:
    """Nothing can write into `array`'s memory: no array it views is writable, and the memory is
    numpy's own, immutable bytes or a mapping that cannot be written through (a read-only
    np.memmap, as the suite's tables are; zero_table). An adapter may keep such an array, or
    let its framework use the memory in place, instead of copying it (a bytearray or a
    writable mapping could change under it)."""
    a: object = array  # then what it views: an array, a memoryview, bytes, a mapping or None
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    if isinstance(a, memoryview):  # np.frombuffer's base in numpy 2: judge what it exports
        a = a.obj
    return a is None or isinstance(a, bytes) or (isinstance(a, mmap.mmap) and memoryview(a).readonly)


# Where a parent process tells its children the cache folders live: the runner gives each child
# its own temporary directory (TMPDIR), which goes when the run ends, while the caches must not.
CACHE_ROOT_VARIABLE = "GPT2_CONFORMANCE_CACHE_ROOT"


def private_cache_root() -> str:
    """The folder of this user's private cache folders: CACHE_ROOT_VARIABLE where set, else
    gpt2-conformance-<uid> in the temp directory."""
    owner = os.getuid() if hasattr(os, "getuid") else "user"
    return os.environ.get(CACHE_ROOT_VARIABLE) or os.path.join(tempfile.gettempdir(), f"gpt2-conformance-{owner}")


def child_temp_env(folder: str) -> dict[str, str]:
    """Variables that give a child process `folder` (made here) as its temporary directory while
    it keeps this process's caches: a caller removes `folder` when the child is gone, so files a
    child could not remove (killed, crashed, ended by os._exit, which runs no finalizer) go too."""
    os.makedirs(folder, exist_ok=True)
    return {"TMPDIR": folder, CACHE_ROOT_VARIABLE: private_cache_root()}


def private_cache_folder(name: str) -> str | None:
    """This user's folder `name` for work one process leaves to the next (mode 0700, owned by this
    user, under private_cache_root()), or None where it cannot be one: another user's, or one others
    may write into, is not read from. None on systems without POSIX owners (Windows): there the
    work is simply done again."""
    if not hasattr(os, "getuid"):
        return None
    mine = private_cache_root()
    folder = os.path.join(mine, name)
    try:
        os.makedirs(mine, mode=0o700, exist_ok=True)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        for path in (mine, folder):
            info = os.lstat(path)
            if info.st_uid != os.getuid() or info.st_mode & 0o022 or not os.path.isdir(path) or os.path.islink(path):
                return None
    except OSError:
        return None
    return folder


def replace_atomically(path: str, write: Callable[[BinaryIO], object]) -> bool:
    """Writes a cache file as write(f) puts it into a temporary file beside `path`, then renames
    it to `path`: a reader in another process sees a whole file or none. False where the disk
    refused (full, the folder removed meanwhile): a cache's next reader does the work again. The
    temporary file never stays behind, whatever write raises."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
