"""One prompt-cache entry as one safetensors file: what is written, and what is trusted back.

An entry is the KV state of a token prefix: per layer, keys and values (an mlx-lm `KVCache`)
or their quantized triples (a `QuantizedKVCache`: packed values, scales, biases), cut to the
tokens they hold. The file's metadata says what it is: the format, the model identity the
folder is keyed by, the tokens themselves (int32, base64) with their digest, and each layer's
kind (class, bits, group size). A file is loaded only when all of it checks out: a header
that parses, a size that matches the header (a truncated write is caught before MLX reads
it), the identity of the folder, the digest of its tokens, and arrays whose token axis
matches the length; anything else is refused with the reason, and its caller removes it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.models import cache as mlx_cache

from engine.memory.shared_prefix import SharedPrefixKVCache, plain_layer
from engine.memory.store import KVState

FORMAT = "corral-prompt-cache/1"
_MAX_HEADER = 64 << 20  # a header this large is not one we wrote


class EntryRefused(ValueError):
    """A file is not a usable entry of this folder; the message says why."""


@dataclass(frozen=True)
class EntryHeader:
    """What a file's header says, once checked."""

    tokens: np.ndarray  # int32
    layout: list[dict[str, Any]]


def tokens_digest(tokens: np.ndarray) -> str:
    """SHA-256 of a token prefix (int32 little-endian): its name and its check."""
    return hashlib.sha256(np.ascontiguousarray(tokens, dtype="<i4").tobytes()).hexdigest()


def entry_name(tokens: np.ndarray) -> str:
    """The file name of the entry holding `tokens`."""
    return tokens_digest(tokens)[:40] + ".safetensors"


def can_write(cache: KVState) -> bool:
    """Whether every layer is one this format holds (full-precision or quantized KV; a
    shared prefix is written as the tokens it holds)."""
    return bool(cache) and all(
        isinstance(c, SharedPrefixKVCache)
        and c.offset
        or type(c) in (mlx_cache.KVCache, mlx_cache.QuantizedKVCache)
        and c.keys is not None
        for c in cache
    )


def serialize(cache: KVState, n: int) -> tuple[dict[str, mx.array], list[dict[str, Any]]]:
    """The arrays of the first `n` tokens of `cache`, evaluated (the caller's thread owns
    the stream: this runs on the engine thread, the file is written elsewhere), and each
    layer's kind."""
    arrays: dict[str, mx.array] = {}
    layout: list[dict[str, Any]] = []
    for i, c in enumerate(cache):
        c = plain_layer(c)
        if type(c) is mlx_cache.QuantizedKVCache:
            layout.append({"kind": "quantized", "bits": c.bits, "group_size": c.group_size})
            parts: tuple[tuple[str, Any], ...] = (("k", c.keys), ("v", c.values))
            for part, triple in parts:
                for j, x in enumerate(triple):
                    arrays[f"{i}.{part}.{j}"] = mx.contiguous(x[..., :n, :])
        else:
            layout.append({"kind": "full"})
            arrays[f"{i}.k"] = mx.contiguous(c.keys[..., :n, :])
            arrays[f"{i}.v"] = mx.contiguous(c.values[..., :n, :])
    mx.eval(list(arrays.values()))
    return arrays, layout


def metadata(identity: str, tokens: np.ndarray, layout: list[dict[str, Any]]) -> dict[str, str]:
    """The header metadata of an entry (safetensors metadata values are strings)."""
    raw = np.ascontiguousarray(tokens, dtype="<i4").tobytes()
    return {
        "format": FORMAT,
        "identity": identity,
        "length": str(len(tokens)),
        "tokens": base64.b64encode(raw).decode("ascii"),
        "digest": tokens_digest(tokens),
        "layout": json.dumps(layout),
    }


def read_header(path: Path, identity: str) -> EntryHeader:
    """Check the file at `path` without loading its arrays; raises EntryRefused."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise EntryRefused("shorter than a safetensors header")
            length = int.from_bytes(head, "little")
            if length > _MAX_HEADER or 8 + length > size:
                raise EntryRefused("header length beyond the file")
            header = json.loads(f.read(length))
    except OSError as exc:
        raise EntryRefused(f"cannot be read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError):
        raise EntryRefused("header is not JSON") from None
    if not isinstance(header, dict):
        raise EntryRefused("header is not an object")
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise EntryRefused("not a Corral prompt-cache entry")
    if meta.get("identity") != identity:
        raise EntryRefused("an entry of another model or KV setting")
    try:
        ends = [int(t["data_offsets"][1]) for t in header.values()]
        tokens = np.frombuffer(base64.b64decode(meta["tokens"], validate=True), dtype="<i4")
        n = int(meta["length"])
        layout = json.loads(meta["layout"])
    except (KeyError, TypeError, ValueError, IndexError):
        raise EntryRefused("metadata is damaged") from None
    if 8 + length + max(ends, default=0) != size:
        raise EntryRefused(f"truncated or padded: {size} bytes, header says otherwise")
    if len(tokens) != n or n == 0 or tokens_digest(tokens) != meta.get("digest"):
        raise EntryRefused("its tokens do not match their digest")
    if not isinstance(layout, list) or not all(isinstance(x, dict) for x in layout):
        raise EntryRefused("layout is damaged")
    return EntryHeader(tokens=tokens.astype(np.int32), layout=layout)


def restore(path: Path, header: EntryHeader) -> KVState:
    """Load the entry at `path` (checked by `read_header`) into a fresh prompt cache on the
    calling thread; raises EntryRefused if its arrays do not match its header."""
    try:
        loaded = mx.load(str(path))
    except Exception as exc:  # MLX raises RuntimeError/ValueError for a damaged file
        raise EntryRefused(f"MLX cannot read it ({exc})") from None
    assert isinstance(loaded, dict)
    n = len(header.tokens)
    cache: KVState = []
    every: list[mx.array] = []
    try:
        for i, layer in enumerate(header.layout):
            c: Any
            if layer.get("kind") == "quantized":
                c = mlx_cache.QuantizedKVCache(int(layer["group_size"]), int(layer["bits"]))
                c.keys = tuple(loaded[f"{i}.k.{j}"] for j in range(3))
                c.values = tuple(loaded[f"{i}.v.{j}"] for j in range(3))
                arrays = [*c.keys, *c.values]
            elif layer.get("kind") == "full":
                c = mlx_cache.KVCache()  # type: ignore[no-untyped-call]
                c.keys, c.values = loaded[f"{i}.k"], loaded[f"{i}.v"]
                arrays = [c.keys, c.values]
            else:
                raise EntryRefused(f"layer {i}: unknown kind {layer.get('kind')!r}")
            if any(a.ndim != 4 or a.shape[2] != n for a in arrays):
                raise EntryRefused(f"layer {i}: arrays do not hold {n} tokens")
            c.offset = n
            cache.append(c)
            every.extend(arrays)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, EntryRefused):
            raise
        raise EntryRefused(f"arrays do not match the layout ({exc})") from None
    if len(loaded) != sum(6 if x.get("kind") == "quantized" else 2 for x in header.layout):
        raise EntryRefused("holds arrays its layout does not name")
    mx.eval(every)
    return cache
