"""The wire protocol's vocabulary, shared by the suite's side (process.py) and the Python server
(serve.py): the array descriptors, the typed scalars, which arrays each call carries, and the
folder of shared memory that large arrays may travel through instead of the pipe.

A message is one line of JSON, the header, then the raw bytes of the arrays it lists (the
schema's description in protocol-1.schema.json says it in full). An array is described by its
numpy dtype name, shape, byte order and byte count, and its bytes are C order; an array may
instead be a file in the shared folder, where the hello said the process takes files. Where the
suite uses a file (the measurements: reports/wire.md): for its read-only tables, which it loads
into adapter after adapter, each a new process, so that one file written once is mapped (or read)
by every one of them instead of the whole table going through a pipe per load. Any other array it
sends goes through the pipe, which moved a bare transfer of one array as fast as a file or faster.
A process may answer with files, as serve.py does with large answers: the suite's largest logits
came back faster that way than through the pipe."""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import mmap
import os
import re
import shutil
import tempfile
import weakref

import numpy as np

PROTOCOL = 1
MAX_HEADER = 1 << 16  # bytes of one header line, newline included
# read-only arrays this large or larger go to a process that takes files as one (a smaller one goes
# through the pipe, where a file costs more than its bytes: reports/wire.md); servers that answer with
# files use it too
SHM_MIN_BYTES = 1 << 20
SHM_ROOT = "/dev/shm"
_SHM_PREFIX = "gpt2c-wire-"

# the dtypes an array may have on the wire: numpy's names; bfloat16 is 2 bytes, the upper half of
# a float32 (numpy has none: it arrives as float32, as a bfloat16 adapter's outputs do)
DTYPES = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),  # its bits; from_bytes widens them to float32
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}
ITEMSIZE = {name: dtype.itemsize for name, dtype in DTYPES.items()}

# the arrays of each call, in order: what the suite sends, and what the process answers
REQUEST_ARRAYS = {
    "hello": (),
    "load_tables": ("wte", "wpe"),
    "tables": (),
    "parameters": (),
    "embed": ("ids",),
    "logits": ("h_final",),
    "init_tables": (),
    "assign_wte_row": ("values",),
    "gradients": ("ids", "cotangent_h", "cotangent_logits"),
}
RESPONSE_ARRAYS = {
    "hello": (),
    "load_tables": (),
    "tables": ("wte", "wpe"),
    "parameters": (),
    "embed": ("h",),
    "logits": ("logits",),
    "init_tables": (),
    "assign_wte_row": (),
    "gradients": ("grad_wte", "grad_wpe"),
}
# the error kinds every process may answer with, and the Python exception each stands for
ERROR_KINDS = {"IndexError": IndexError, "ValueError": ValueError, "TypeError": TypeError, "RuntimeError": RuntimeError}


class WireError(ValueError):
    """What came over the wire cannot be used (one line: which array or field, and why)."""


def wire_dtype(array: np.ndarray) -> str:
    """The wire's name for an array's dtype; TypeError for one the wire does not carry."""
    name = array.dtype.name
    if name not in DTYPES or DTYPES[name].kind != array.dtype.kind:
        raise TypeError(f"the wire protocol carries {', '.join(DTYPES)} arrays, not {array.dtype}")
    return name


def describe(name: str, array: np.ndarray) -> tuple[dict, memoryview]:
    """(the array's descriptor, its bytes: C order, little-endian) for sending."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(array).__name__}")
    dtype = wire_dtype(array)
    data = array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)
    desc = {"name": name, "dtype": dtype, "shape": list(data.shape), "byteorder": "little", "nbytes": data.nbytes}
    return desc, data.data.cast("B") if data.nbytes else memoryview(b"")


def request(call: str, fields: dict, arrays: list[dict]) -> dict:
    """A request header (the schema's $defs/requests/<call>): the call, its fields, its arrays."""
    return {"call": call, **fields, "arrays": arrays}


def expected_nbytes(desc: dict) -> int:
    return math.prod(desc["shape"]) * ITEMSIZE[desc["dtype"]]


def check_nbytes(desc: dict) -> None:
    """The byte count agrees with the dtype and shape the descriptor announces."""
    want = expected_nbytes(desc)
    if desc["nbytes"] != want:
        shape = ", ".join(map(str, desc["shape"]))
        raise WireError(
            f"array {desc['name']!r} announces {desc['dtype']}[{shape}], which is {want} bytes, "
            f"but its nbytes is {desc['nbytes']}"
        )


def from_bytes(desc: dict, buffer) -> np.ndarray:
    """The array a descriptor announces, over `buffer` (exactly its nbytes), in native byte order."""
    dtype = DTYPES[desc["dtype"]].newbyteorder("<" if desc["byteorder"] == "little" else ">")
    out = np.frombuffer(buffer, dtype=dtype).reshape(desc["shape"])
    if not dtype.isnative:
        out = out.astype(dtype.newbyteorder("="))
    if desc["dtype"] == "bfloat16":
        out = (out.astype(np.uint32) << 16).view(np.float32)
    return out


def scalar(value, what: str) -> dict:
    """A number argument as the wire carries it: its Python type and value. past_length is passed
    as an int, a numpy integer or a 0-d integer array, and, where the suite checks it is refused,
    as a float or a bool: the process is told which."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return {"type": "bool", "value": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"type": "int", "value": int(value)}
    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        return {"type": "float", "value": float(value)}
    raise TypeError(f"{what}={value!r}: the wire protocol carries an int, a float or a bool here")


def from_scalar(field: dict):
    """The Python value of a typed scalar (the server's side)."""
    kind, value = field["type"], field["value"]
    return bool(value) if kind == "bool" else float(value) if kind == "float" else int(value)


class SharedFolder:
    """A folder in /dev/shm for arrays that travel as files: one per process of the suite, shared by
    the implementation processes it starts, removed when the suite's process ends. A folder whose
    owner died without removing it (killed mid-run) is removed by the next suite process that makes
    one. Files are written once and never changed: the reader may map them."""

    def __init__(self, root: str = SHM_ROOT):
        _remove_orphans(root)
        self.path = tempfile.mkdtemp(prefix=f"{_SHM_PREFIX}{os.getpid()}-", dir=root)
        self.owner = os.getpid()
        self._names = itertools.count()
        self._kept: dict[int, tuple[weakref.ref, str]] = {}  # id(array) -> (the array, its file)

    def file_for(self, array: np.ndarray, payload: memoryview) -> str:
        """The file holding a read-only array's bytes: written once and kept while the array lives, so
        the suite's tables, loaded into adapter after adapter, are one file that each process maps."""
        key = id(array)
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is array:
            return kept[1]
        name = self.write(payload)
        self._kept[key] = (weakref.ref(array, functools.partial(self._forget, key, name)), name)
        return name

    def _forget(self, key: int, name: str, _dead=None) -> None:
        self._kept.pop(key, None)
        if os.getpid() == self.owner:
            self.remove(name)

    def write(self, payload: memoryview) -> str:
        """A new file holding `payload`; its name in the folder."""
        name = f"s{next(self._names)}.bin"
        fd = os.open(os.path.join(self.path, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            done = 0
            while done < payload.nbytes:
                done += os.write(fd, payload[done : done + (1 << 30)])
        finally:
            os.close(fd)
        return name

    def file(self, name: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", name):
            raise WireError(f"file {name!r} is not a plain file name in the shared folder")
        return os.path.join(self.path, name)

    def remove(self, name: str) -> None:
        with contextlib.suppress(OSError, WireError):
            os.unlink(self.file(name))

    def close(self) -> None:
        if os.getpid() == self.owner:
            shutil.rmtree(self.path, ignore_errors=True)


def _remove_orphans(root: str) -> None:
    """Remove the shared folders of suite processes that no longer run."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        match = re.fullmatch(re.escape(_SHM_PREFIX) + r"(\d+)-\w+", name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def shared_folder_available(root: str = SHM_ROOT) -> bool:
    return os.path.isdir(root) and os.access(root, os.W_OK | os.X_OK)


def map_file(path: str, nbytes: int) -> memoryview:
    """The first nbytes of a file, mapped copy-on-write (a writable array that costs no copy);
    WireError where the file is missing or shorter."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise WireError(f"cannot open {os.path.basename(path)} in the shared folder: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        if size < nbytes:
            raise WireError(f"file {os.path.basename(path)} holds {size} of its {nbytes} bytes")
        if nbytes == 0:
            return memoryview(bytearray())
        return memoryview(mmap.mmap(fd, nbytes, access=mmap.ACCESS_COPY))
    finally:
        os.close(fd)
