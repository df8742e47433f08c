"""What a KV state belongs to: the model's weights and the layout and precision of its cache.

The disk tier keeps one folder per identity, so an entry is only ever read back by the same
weights computing the same kind of cache. The weights' digest is the SHA-256 of the model
folder's weight and config files (as imports are hashed, `engine.library.import_cache`),
computed once and remembered beside the cache by each file's fingerprint (size, inode,
modification time), so later loads do not read the weights again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from engine.files import check_inside
from engine.memory.kv_precision import group_size, kv_dtype_bytes

_DIGESTS = "weights-digests.json"
_HASHED = ("*.safetensors", "config.json")


def _fingerprint(files: list[Path]) -> str:
    parts = []
    for f in files:
        info = f.stat()
        parts.append(f"{f.name}:{info.st_size}:{info.st_ino}:{info.st_mtime_ns}")
    return f"{files[0].parent.resolve()}|" + "|".join(parts)


def weights_digest(model_dir: Path, memo_dir: Path) -> str:
    """SHA-256 of the model folder's weights and config, remembered in `memo_dir`."""
    files = sorted({p for pattern in _HASHED for p in model_dir.glob(pattern) if p.is_file()})
    if not files:
        raise ValueError(f"{model_dir}: no weights to identify the model by")
    key = _fingerprint(files)
    memo_path = memo_dir / _DIGESTS
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
        memo = memo if isinstance(memo, dict) else {}
    except (OSError, ValueError):
        memo = {}
    if isinstance(memo.get(key), str):
        return str(memo[key])
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            while chunk := fh.read(8 << 20):
                digest.update(chunk)
    value = digest.hexdigest()
    memo = dict(list(memo.items())[-63:])  # the last models seen, not every one ever
    memo[key] = value
    memo_dir.mkdir(parents=True, exist_ok=True)
    temp = check_inside(memo_dir / f".digests-{secrets.token_hex(6)}.json", memo_dir)
    try:
        temp.write_text(json.dumps(memo), encoding="utf-8")
        os.replace(temp, check_inside(memo_path, memo_dir))
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    return value


def cache_identity(model: Any, model_dir: Path, kv_bits: int | None, root: Path) -> str:
    """The folder name (under `root`) of the model's entries at this KV precision: the
    weights' digest, the cache's layer kinds, its dtype and quantization, hashed."""
    from mlx_lm.models.cache import make_prompt_cache

    size = group_size(model)
    layout = {
        "weights": weights_digest(model_dir, root),
        "layers": [type(c).__name__ for c in make_prompt_cache(model)],
        "dtype_bytes": kv_dtype_bytes(model),
        "kv_bits": kv_bits if size is not None else None,
        "group_size": size if kv_bits is not None else None,
    }
    blob = json.dumps(layout, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:32]
