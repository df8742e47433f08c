"""How a model's token vectors become one vector, as its sentence-transformers files say.

A sentence-transformers folder lists its stages in `modules.json` (the transformer, a
`Pooling` stage whose `1_Pooling/config.json` names the pooling, optional `Dense` layers and
a `Normalize` stage). A folder without those files is pooled as mlx-embeddings pools its
family, and normalised as mlx-embeddings always does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.errors import ModelLoadError

Pooling = Literal["cls", "mean", "last"]

# The pooling modes of sentence-transformers' Pooling stage that Corral computes.
_MODES: dict[str, Pooling] = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "last",
}
_UNSUPPORTED_MODES = (
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
)


@dataclass(frozen=True)
class PoolingConfig:
    """What the folder asks for: a pooling (None: the family's own), whether the vector is
    normalised to length 1, and whether Dense layers follow the pooling."""

    pooling: Pooling | None = None
    normalize: bool = True
    dense: bool = False


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{path}: cannot read it: {exc}") from None


def read_pooling(folder: Path) -> PoolingConfig:
    """The pooling `folder`'s sentence-transformers files ask for; ModelLoadError naming
    the file for a pooling Corral does not compute."""
    modules_path = folder / "modules.json"
    if not modules_path.is_file():
        return PoolingConfig()
    modules = _read(modules_path)
    if not isinstance(modules, list):
        raise ModelLoadError(f"{modules_path}: expected a list of modules")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules if isinstance(m, dict)]
    pooling: Pooling | None = None
    for module in modules:
        if isinstance(module, dict) and str(module.get("type", "")).endswith(".Pooling"):
            pooling = _pooling_mode(folder / str(module.get("path", "1_Pooling")))
    return PoolingConfig(pooling=pooling, normalize="Normalize" in kinds, dense="Dense" in kinds)


def _pooling_mode(stage: Path) -> Pooling | None:
    path = stage / "config.json"
    if not path.is_file():
        return None
    config = _read(path)
    if not isinstance(config, dict):
        raise ModelLoadError(f"{path}: expected a JSON object")
    for key in _UNSUPPORTED_MODES:
        if config.get(key):
            raise ModelLoadError(
                f"{path}: {key} is not supported (Corral pools by the first token, the mean "
                "or the last token)"
            )
    chosen = [mode for key, mode in _MODES.items() if config.get(key)]
    if len(chosen) > 1:
        raise ModelLoadError(f"{path}: several pooling modes at once are not supported")
    return chosen[0] if chosen else None
