"""A TensorFlow checkpoint (tensor_bundle, V2) read without TensorFlow.

`model.ckpt.index` is a LevelDB-format table (tensorflow/core/lib/io/table_format.md), written
uncompressed: a footer with the index block's handle, an index block of data-block handles,
data blocks of prefix-compressed (key, value) entries, each block followed by a type byte and
a masked crc32c. The key "" holds a BundleHeaderProto; every other key is a tensor name and
its value a BundleEntryProto (tensorflow/core/protobuf/tensor_bundle.proto): dtype, shape,
shard_id, offset, size and the masked crc32c of the tensor's bytes in
`model.ckpt.data-SSSSS-of-NNNNN`. Every crc is checked, so a corrupted file is named, not read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from gpt2_conformance.golden import digests

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
# tensorflow/core/framework/types.proto
DTYPES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    9: "int64",
    10: "bool",
    14: "bfloat16",
    17: "uint16",
    19: "float16",
    22: "uint32",
    23: "uint64",
}


class BundleError(ValueError):
    """Malformed index or data file; readers.py adds the file name."""


@dataclass(frozen=True)
class Entry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int | None  # masked
    sliced: bool


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise BundleError("varint runs past the end of its block")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise BundleError("varint longer than 10 bytes")


def _proto_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a serialized protobuf message: a number, or the bytes
    of a length-delimited field."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = struct.unpack_from("<Q", buf, pos)[0], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            value, pos = struct.unpack_from("<I", buf, pos)[0], pos + 4
        else:
            raise BundleError(f"unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise BundleError("protobuf field runs past the end of its value")
        yield field, wire, value


def _number(what: str, value: int | bytes) -> int:
    if not isinstance(value, int):
        raise BundleError(f"{what} is length-delimited ({len(value)} bytes), but should be a number")
    return value


def _message(what: str, value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise BundleError(f"{what} is the number {value}, but should be a message")
    return value


def _shape(buf: bytes) -> tuple[int, ...]:
    dims = []
    for field, _, value in _proto_fields(buf):
        if field == 2:  # Dim
            dim = _message("a TensorShapeProto dim", value)
            dims.append(next((_number("a dim's size", v) for f, _, v in _proto_fields(dim) if f == 1), 0))
        elif field == 3 and value:
            raise BundleError("tensor of unknown rank")
    return tuple(dims)


# BundleEntryProto's fields that are numbers (tensorflow/core/protobuf/tensor_bundle.proto), but crc32c (6);
# 2 is the shape, 7 the slices
ENTRY_NUMBERS = {1: "dtype", 3: "shard_id", 4: "offset", 5: "size"}


def _entry(name: str, buf: bytes) -> Entry:
    n = {"dtype": 0, "shard_id": 0, "offset": 0, "size": 0}
    crc32c: int | None = None
    shape, sliced = b"", False
    for field, _, value in _proto_fields(buf):
        if field in ENTRY_NUMBERS:
            n[ENTRY_NUMBERS[field]] = _number(f"tensor {name}: {ENTRY_NUMBERS[field]}", value)
        elif field == 6:
            crc32c = _number(f"tensor {name}: crc32c", value)
        elif field == 2:
            shape = _message(f"tensor {name}: shape", value)
        elif field == 7:
            sliced = True
    dtype = DTYPES.get(n["dtype"], f"DT_{n['dtype']}")
    return Entry(name, dtype, _shape(shape), n["shard_id"], n["offset"], n["size"], crc32c, sliced)


def _block(data: bytes, offset: int, size: int) -> bytes:
    if offset + size + 5 > len(data):
        raise BundleError(f"block at byte {offset} (+{size}) runs past the end of the file ({len(data)} bytes)")
    contents, kind = data[offset : offset + size], data[offset + size]
    stored = struct.unpack_from("<I", data, offset + size + 1)[0]
    if digests.mask(digests.crc32c(contents + bytes([kind]))) != stored:
        raise BundleError(f"block at byte {offset}: crc32c mismatch (the file is corrupted)")
    if kind != 0:
        raise BundleError(f"block at byte {offset} is compressed (type {kind}); only uncompressed indexes are read")
    return contents


def _block_entries(block: bytes):
    if len(block) < 4:
        raise BundleError("block shorter than its restart count")
    n_restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    end = len(block) - 4 - 4 * n_restarts
    if end < 0:
        raise BundleError("restart array larger than its block")
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        vlen, pos = _varint(block, pos)
        if shared > len(key) or pos + unshared + vlen > end:
            raise BundleError("entry runs past the end of its block")
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        yield key, block[pos : pos + vlen]
        pos += vlen


def read_index(path: str) -> tuple[dict, dict[str, Entry]]:
    """(header fields, name -> Entry) of a `.index` file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < FOOTER_SIZE:
        raise BundleError(f"{len(data)} bytes is too short for a checkpoint index (footer is {FOOTER_SIZE})")
    if struct.unpack_from("<Q", data, len(data) - 8)[0] != TABLE_MAGIC:
        raise BundleError("no table magic number at the end: not a TF checkpoint index, or truncated")
    footer = data[-FOOTER_SIZE:]
    _, pos = _varint(footer, 0)  # metaindex handle (unused)
    _, pos = _varint(footer, pos)
    index_offset, pos = _varint(footer, pos)
    index_size, _ = _varint(footer, pos)
    header, entries = {}, {}
    for _, handle in _block_entries(_block(data, index_offset, index_size)):
        offset, pos = _varint(handle, 0)
        size, _ = _varint(handle, pos)
        for key, value in _block_entries(_block(data, offset, size)):
            if key == b"":
                header = {{1: "num_shards", 2: "endianness"}.get(f, f): v for f, _, v in _proto_fields(value)}
            else:
                name = key.decode("utf-8", "replace")
                entries[name] = _entry(name, value)
    return header, entries


def data_path(prefix: str, shard_id: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard_id:05d}-of-{num_shards:05d}"


def read_tensor_bytes(prefix: str, header: dict, entry: Entry) -> bytes:
    """The raw bytes of one tensor, checked against the index's crc32c."""
    if header.get("endianness", 0) != 0:
        raise BundleError("big-endian checkpoint")
    if entry.sliced:
        raise BundleError("tensor is saved in slices (a partitioned variable)")
    path = data_path(prefix, entry.shard_id, header.get("num_shards", 1))
    if not os.path.exists(path):
        raise BundleError(f"data file {path} is missing")
    with open(path, "rb") as f:
        f.seek(entry.offset)
        raw = f.read(entry.size)
    if len(raw) != entry.size:
        raise BundleError(
            f"{path} is truncated: {entry.size} bytes at offset {entry.offset} were expected, {len(raw)} are there"
        )
    if entry.crc32c is not None and digests.mask(digests.crc32c(raw)) != entry.crc32c:
        raise BundleError(f"crc32c of the bytes in {path} does not match the index (the data file is corrupted)")
    return raw
