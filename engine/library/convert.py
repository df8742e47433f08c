"""Convert a GGUF file into MLX weights and a config, one tensor at a time.

Memory stays bounded by the largest quantized tensor plus one shard of output: tensors are
read as views of a memory map, converted (see `quants`), renamed and fixed up for mlx-lm
(see `architectures`), and written out in safetensors shards of at most `SHARD_BYTES`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.errors import ModelLoadError
from engine.library.architectures import (
    IGNORED_TENSORS,
    Architecture,
    architecture_for,
    model_config,
    unpermute_rows,
)
from engine.library.gguf_file import GGUFHeader, MappedGGUF, TensorInfo, release, tensor_bytes
from engine.library.quants import QuantChoice, check_supported, convert_tensor

if TYPE_CHECKING:  # imported when weights are written, so this module loads without MLX
    import mlx.core as mx

ProgressFn = Callable[[str, float], None]

SHARD_BYTES = 512 << 20  # output held in memory before it is written
IMPORT_FORMAT = 3  # bump when the output of an import changes, so old imports are redone


class ShardWriter:
    """Collects arrays and writes `model.safetensors` (or numbered shards when large)."""

    def __init__(self, folder: Path, max_bytes: int = SHARD_BYTES) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.pending: dict[str, mx.array] = {}
        self.pending_bytes = 0
        self.files: list[tuple[Path, list[str]]] = []
        self.total_bytes = 0

    def add(self, name: str, value: mx.array) -> None:
        if self.pending and self.pending_bytes + value.nbytes > self.max_bytes:
            self.flush()
        self.pending[name] = value
        self.pending_bytes += value.nbytes
        self.total_bytes += value.nbytes

    def flush(self) -> None:
        if not self.pending:
            return
        import mlx.core as mx

        path = self.folder / f"model-{len(self.files) + 1:05d}.safetensors"
        mx.save_safetensors(str(path), self.pending, metadata={"format": "mlx"})
        self.files.append((path, list(self.pending)))
        self.pending, self.pending_bytes = {}, 0
        mx.clear_cache()  # give the shard's memory back rather than keep it cached

    def close(self) -> list[str]:
        """Write what is left; name the files as Hugging Face does; return their names."""
        self.flush()
        if len(self.files) == 1:
            only = self.folder / "model.safetensors"
            self.files[0][0].rename(only)
            return [only.name]
        count = len(self.files)
        weight_map: dict[str, str] = {}
        names = []
        for i, (path, keys) in enumerate(self.files, 1):
            final = self.folder / f"model-{i:05d}-of-{count:05d}.safetensors"
            path.rename(final)
            names.append(final.name)
            weight_map |= dict.fromkeys(keys, final.name)
        index = {"metadata": {"total_size": self.total_bytes}, "weight_map": weight_map}
        (self.folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
        return names


def _fix_up(
    arch: Architecture,
    name: str,
    arrays: dict[str, mx.array],
    meta: dict[str, Any],
) -> dict[str, mx.array]:
    """Undo what llama.cpp's converter did to this tensor."""
    if arch.permute_qk and (".q_proj." in name or ".k_proj." in name):
        key = "attention.head_count" if ".q_proj." in name else "attention.head_count_kv"
        heads = int(meta.get(arch.key(key)) or meta[arch.key("attention.head_count")])
        arrays = {k: unpermute_rows(v, heads) for k, v in arrays.items()}
    if arch.norm_plus_one and "norm." in name:
        arrays = {k: v - 1 for k, v in arrays.items()}
    return arrays


def _quantize_this(name: str, info: TensorInfo) -> bool:
    return name.endswith(".weight") and len(info.shape) == 2 and "norm" not in name


def _summary(types: Counter[str], choices: dict[str, QuantChoice]) -> dict[str, Any]:
    """What the import did, for config.json and the library."""
    return {
        "format": IMPORT_FORMAT,
        "gguf_tensor_types": dict(types.most_common()),
        "stored_as": {
            t: {
                "bits": c.bits,
                "group_size": c.group_size,
                "method": "repacked" if c.repacked else "re-quantized",
            }
            for t, c in sorted(choices.items())
        },
    }


def convert_gguf(
    gguf: MappedGGUF, out: Path, report: ProgressFn
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write MLX weights for a GGUF file into the folder `out`.

    Args:
        gguf: the file, opened by `gguf_file.open_gguf` (its header checked, arrays read).
        out: an existing, empty folder (the caller makes it atomic).
        report: progress callback (stage, fraction 0..1); conversion spans 0.1..0.85.

    Returns the model config (with `quantization` and a `corral_import` record) and the
    file's metadata (for the tokenizer); raises ModelLoadError naming the file on bad input.
    """
    header, buf = gguf
    arch = architecture_for(header.metadata, header.path)
    for info in header.tensors:
        check_supported(info, header.path)
    return _convert(header, buf, arch, out, report), header.metadata


def _convert(
    header: GGUFHeader, buf: Any, arch: Architecture, out: Path, report: ProgressFn
) -> dict[str, Any]:
    source, meta = header.path, header.metadata
    writer = ShardWriter(out)
    quantization: dict[str, Any] = {}
    choices: dict[str, QuantChoice] = {}
    types: Counter[str] = Counter()
    aux: dict[str, np.ndarray] = {}
    names: set[str] = set()
    embed_rows = None
    total = sum(t.nbytes for t in header.tensors) or 1
    done = 0
    last_report = 0.0
    for info in header.tensors:
        types[info.type_name] += 1
        raw = tensor_bytes(buf, info)
        if info.name in arch.aux_tensors:
            aux[info.name] = np.array(convert_tensor(raw, info, quantize=False)[0]["weight"])
            continue
        name = arch.mlx_name(info.name)
        if name is None:
            if IGNORED_TENSORS.match(info.name):
                continue
            raise ModelLoadError(
                f"{source}: unexpected tensor {info.name!r} for architecture {arch.name}"
            )
        arrays, choice = convert_tensor(raw, info, quantize=_quantize_this(name, info))
        del raw
        release(buf, info)
        arrays = _fix_up(arch, name, arrays, meta)
        module = name.rsplit(".", 1)[0]
        if choice is not None:
            quantization[module] = {"group_size": choice.group_size, "bits": choice.bits}
            choices[info.type_name] = choice
        if name == "model.embed_tokens.weight":
            embed_rows = info.shape[0]
        for kind, value in arrays.items():
            key = name if kind == "weight" else f"{module}.{kind}"
            writer.add(key, value)
            names.add(key)
        done += info.nbytes
        now = time.monotonic()
        if now - last_report > 0.2:
            last_report = now
            report("Converting weights", 0.1 + 0.75 * done / total)
    if embed_rows is None:
        raise ModelLoadError(f"{source}: missing tensor token_embd.weight")
    report("Writing weights", 0.85)
    writer.close()

    tied = "lm_head.weight" not in names
    try:
        vocab = int(meta.get(arch.key("vocab_size")) or embed_rows)
        config = model_config(arch, meta, vocab, tied)
        arch.extra_config(meta, config, aux)
    except ModelLoadError as exc:
        raise ModelLoadError(f"{source}: {exc}") from exc
    if quantization:
        # mlx-lm reads a per-module map; the top-level values are the most common choice.
        common = Counter((q["bits"], q["group_size"]) for q in quantization.values())
        bits, group = common.most_common(1)[0][0]
        config["quantization"] = {"group_size": group, "bits": bits, "mode": "affine"}
        config["quantization"].update(quantization)
    config["corral_import"] = _summary(types, choices)
    return config
