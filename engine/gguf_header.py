"""Check a GGUF file's header, in Python, before any native loader sees the file.

MLX's GGUF loader (gguflib, in C) trusts the header: a file that declares 2^62 tensors,
a string longer than the file or a tensor past its end makes it read out of bounds and the
process dies. `check_gguf` walks the whole header (counts, key-value pairs, tensor
infos) with every count, length and offset bounded by the file's size, and raises
ModelLoadError("PATH: not a valid GGUF: FIELD: ...") naming the first field that is wrong.
It reads only the header (a few MB for a tokenizer-heavy file), never the tensor data.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NAME_BYTES = 65_535
MAX_ARRAY_NESTING = 4
_MAX_DIM = 2**31 - 1  # MLX shapes are int32

# value types: (struct format, size) for fixed-size ones
_STRING, _ARRAY = 8, 9
_FIXED: dict[int, tuple[str, int]] = {
    0: ("<B", 1),  # uint8
    1: ("<b", 1),  # int8
    2: ("<H", 2),  # uint16
    3: ("<h", 2),  # int16
    4: ("<I", 4),  # uint32
    5: ("<i", 4),  # int32
    6: ("<f", 4),  # float32
    7: ("<B", 1),  # bool
    10: ("<Q", 8),  # uint64
    11: ("<q", 8),  # int64
    12: ("<d", 8),  # float64
}

# ggml tensor types: (name, elements per block, bytes per block), from ggml.h / gguf-py.
TENSOR_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it; `offset` is absolute in the file."""

    name: str
    shape: tuple[int, ...]  # as GGUF lists it: the fastest-varying dimension first
    type_id: int
    offset: int
    nbytes: int

    @property
    def type_name(self) -> str:
        return TENSOR_TYPES[self.type_id][0]


@dataclass(frozen=True)
class GGUFHeader:
    """What a checked header holds: its version, key names and tensors (no values, so
    big vocabularies cost nothing to keep)."""

    version: int
    keys: tuple[str, ...]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int
    file_size: int
    header_size: int  # bytes before the padding that precedes the tensor data


class _Invalid(Exception):
    """A header field is wrong; the message names it."""


class _Reader:
    def __init__(self, buf: mmap.mmap | bytes, size: int) -> None:
        self.buf = buf
        self.size = size
        self.pos = 0

    def left(self) -> int:
        return self.size - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > self.left():
            raise _Invalid(
                f"{what}: needs {n:,} bytes at offset {self.pos:,}, past the end of the file"
            )
        data = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n < 0 or n > self.left():
            raise _Invalid(
                f"{what}: needs {n:,} bytes at offset {self.pos:,}, past the end of the file"
            )
        self.pos += n

    def unpack(self, fmt: str, size: int, what: str) -> int | float:
        value: int | float = struct.unpack(fmt, self.take(size, what))[0]
        return value

    def u32(self, what: str) -> int:
        return int(self.unpack("<I", 4, what))

    def u64(self, what: str) -> int:
        return int(self.unpack("<Q", 8, what))

    def string(self, what: str, limit: int | None = None) -> str:
        length = self.u64(f"{what} (length)")
        if length > self.left():
            raise _Invalid(f"{what}: length {length:,} runs past the end of the file")
        if limit is not None and length > limit:
            raise _Invalid(f"{what}: {length:,} bytes long (at most {limit:,})")
        return self.take(length, what).decode("utf-8", "replace")

    def skip_string(self, what: str) -> None:
        length = self.u64(f"{what} (length)")
        if length > self.left():
            raise _Invalid(f"{what}: length {length:,} runs past the end of the file")
        self.pos += length


_U64 = struct.Struct("<Q")


def _skip_strings(r: _Reader, count: int, what: str) -> None:
    """Skip `count` strings (a vocabulary: tens of thousands), checking each length."""
    buf, pos, size, unpack = r.buf, r.pos, r.size, _U64.unpack_from
    for i in range(count):
        if pos + 8 > size:
            r.pos = pos
            raise _Invalid(f"{what}[{i}] (length): past the end of the file")
        pos += 8 + unpack(buf, pos)[0]
        if pos > size:
            raise _Invalid(f"{what}[{i}]: runs past the end of the file")
    r.pos = pos


def _value(r: _Reader, type_id: int, what: str, nesting: int = 0) -> int | None:
    """Skip one value of `type_id`; return it when it is an unsigned integer (for
    `general.alignment`)."""
    if type_id in _FIXED:
        fmt, size = _FIXED[type_id]
        value = r.unpack(fmt, size, what)
        return int(value) if type_id in (4, 10) else None
    if type_id == _STRING:
        r.skip_string(what)
        return None
    if type_id == _ARRAY:
        if nesting >= MAX_ARRAY_NESTING:
            raise _Invalid(f"{what}: arrays nested more than {MAX_ARRAY_NESTING} deep")
        item_type = r.u32(f"{what} (array item type)")
        count = r.u64(f"{what} (array length)")
        if count > 2**31 - 1:
            raise _Invalid(f"{what}: array of {count:,} items (at most {2**31 - 1:,})")
        if item_type in _FIXED:
            r.skip(count * _FIXED[item_type][1], f"{what} ({count:,} items)")
        elif item_type == _STRING:
            if count * 8 > r.left():
                raise _Invalid(f"{what}: {count:,} strings cannot fit in the rest of the file")
            _skip_strings(r, count, what)
        elif item_type == _ARRAY:
            if count * 12 > r.left():
                raise _Invalid(f"{what}: {count:,} arrays cannot fit in the rest of the file")
            for i in range(count):
                _value(r, _ARRAY, f"{what}[{i}]", nesting + 1)
        else:
            raise _Invalid(f"{what}: unknown array item type {item_type}")
        return None
    raise _Invalid(f"{what}: unknown value type {type_id}")


def _tensor_nbytes(name: str, shape: tuple[int, ...], type_id: int) -> int:
    type_name, block, block_bytes = TENSOR_TYPES[type_id]
    if shape[0] % block:
        raise _Invalid(
            f"tensor {name!r}: first dimension {shape[0]:,} is not a multiple of "
            f"{type_name}'s block of {block}"
        )
    count = 1
    for dim in shape:
        count *= dim
    return count // block * block_bytes


def _parse(buf: mmap.mmap | bytes, size: int) -> GGUFHeader:
    r = _Reader(buf, size)
    magic = r.take(4, "magic")
    if magic != GGUF_MAGIC:
        raise _Invalid(f"magic: expected b'GGUF', found {magic!r}")
    version = r.u32("version")
    if version not in SUPPORTED_VERSIONS:
        raise _Invalid(f"version: {version} (Corral reads GGUF versions 2 and 3)")
    n_tensors = r.u64("tensor_count")
    n_kv = r.u64("metadata_kv_count")
    # Every key-value pair takes at least 13 bytes and every tensor info at least 25.
    if n_kv > r.left() // 13:
        raise _Invalid(f"metadata_kv_count: {n_kv:,} entries cannot fit in a {size:,}-byte file")
    if n_tensors > r.left() // 25:
        raise _Invalid(f"tensor_count: {n_tensors:,} tensors cannot fit in a {size:,}-byte file")
    keys: list[str] = []
    alignment = DEFAULT_ALIGNMENT
    seen: set[str] = set()
    for i in range(n_kv):
        key = r.string(f"metadata key {i + 1}", MAX_NAME_BYTES)
        if key in seen:
            raise _Invalid(f"metadata key {key!r}: appears twice")
        seen.add(key)
        type_id = r.u32(f"metadata {key!r} (type)")
        value = _value(r, type_id, f"metadata {key!r}")
        if key == "general.alignment":
            if type_id != 4 or value is None or value == 0 or value & (value - 1):
                raise _Invalid(
                    f"metadata 'general.alignment': must be a power of two (uint32), got {value}"
                )
            alignment = value
        keys.append(key)
    infos: list[tuple[str, tuple[int, ...], int, int]] = []
    names: set[str] = set()
    for i in range(n_tensors):
        name = r.string(f"tensor {i + 1} (name)", MAX_NAME_BYTES)
        if name in names:
            raise _Invalid(f"tensor {name!r}: appears twice")
        names.add(name)
        n_dims = r.u32(f"tensor {name!r} (n_dims)")
        if not 1 <= n_dims <= MAX_DIMS:
            raise _Invalid(f"tensor {name!r}: n_dims is {n_dims} (1 to {MAX_DIMS})")
        shape = tuple(r.u64(f"tensor {name!r} (dimension {d + 1})") for d in range(n_dims))
        if any(not 1 <= d <= _MAX_DIM for d in shape):
            raise _Invalid(f"tensor {name!r}: dimensions {list(shape)} (each 1 to {_MAX_DIM:,})")
        type_id = r.u32(f"tensor {name!r} (type)")
        if type_id not in TENSOR_TYPES:
            raise _Invalid(f"tensor {name!r}: unknown tensor type {type_id}")
        offset = r.u64(f"tensor {name!r} (offset)")
        infos.append((name, shape, type_id, offset))
    data_offset = r.pos + (-r.pos) % alignment
    header_end = r.pos
    tensors: list[TensorInfo] = []
    for name, shape, type_id, offset in infos:
        nbytes = _tensor_nbytes(name, shape, type_id)
        if offset % alignment:
            raise _Invalid(f"tensor {name!r}: offset {offset:,} is not a multiple of {alignment}")
        start = data_offset + offset
        if start > size or nbytes > size - start:
            raise _Invalid(
                f"tensor {name!r} ({TENSOR_TYPES[type_id][0]}): {nbytes:,} bytes at offset "
                f"{start:,} run past the end of the {size:,}-byte file (truncated?)"
            )
        tensors.append(TensorInfo(name, shape, type_id, start, nbytes))
    return GGUFHeader(
        version=version,
        keys=tuple(keys),
        tensors=tuple(tensors),
        alignment=alignment,
        data_offset=data_offset,
        file_size=size,
        header_size=header_end,
    )


def check_gguf(path: str | os.PathLike[str]) -> GGUFHeader:
    """Check the header of the GGUF file at `path` against its size and return it.

    Raises ModelLoadError naming the file: missing, not a regular file, or "not a valid
    GGUF: FIELD: what is wrong".
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block
    except FileNotFoundError:
        raise ModelLoadError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ModelLoadError(f"{p}: is a folder, not a GGUF file") from None
    except OSError as exc:
        raise ModelLoadError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ModelLoadError(f"{p}: is a folder, not a GGUF file")
        if not stat.S_ISREG(info.st_mode):
            raise ModelLoadError(f"{p}: not a valid GGUF: not a regular file (a device or pipe)")
        if info.st_size < 24:
            raise ModelLoadError(
                f"{p}: not a valid GGUF: header: the file has {info.st_size} bytes, fewer than "
                "a GGUF header's 24"
            )
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
            return _parse(buf, info.st_size)
    except _Invalid as exc:
        raise ModelLoadError(f"{p}: not a valid GGUF: {exc}") from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{p}: cannot be read ({exc})") from None
    finally:
        os.close(fd)
