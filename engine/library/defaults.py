"""A model's recommended sampling settings, for front ends to start from.

They come from the model folder's `generation_config.json` (the Hugging Face convention)
when it sets any, else from a short table of model cards for models whose files carry none
(the bundled SmolLM2's GGUF has no sampling metadata; its card recommends temperature 0.2
and top-p 0.9, and the 135M model rambles at 0.7). Values out of range are ignored: the
file is input from a download. No MLX here.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
GENERATION_CONFIG = "generation_config.json"

# Model-name prefix (case-insensitive) -> settings from the model's card.
MODEL_CARDS: dict[str, dict[str, float]] = {
    "SmolLM2-135M-Instruct": {"temperature": 0.2, "top_p": 0.9},
    "SmolLM2-360M-Instruct": {"temperature": 0.2, "top_p": 0.9},
    "SmolLM2-1.7B-Instruct": {"temperature": 0.2, "top_p": 0.9},
}


@dataclass(frozen=True)
class ModelDefaults:
    """Recommended sampling values (only those the source sets) and where they came from:
    "generation_config.json", "model card", or "" when the model recommends nothing."""

    values: dict[str, float] = field(default_factory=dict)
    source: str = ""


def _valid(key: str, value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    if key == "temperature":
        return 0 <= value <= 5
    if key == "top_p":
        return 0 < value <= 1
    if key == "top_k":
        return value >= 0 and float(value).is_integer()
    if key == "min_p":
        return 0 <= value < 1
    return 0 < value <= 5  # repetition_penalty


def from_generation_config(data: dict[str, Any]) -> dict[str, float]:
    """The sampling values a parsed generation_config.json sets. `do_sample: false` means
    greedy decoding whatever the temperature says."""
    values = {k: float(data[k]) for k in SAMPLING_KEYS if k in data and _valid(k, data[k])}
    if data.get("do_sample") is False:
        values = {"temperature": 0.0}
    if values.get("top_k") == 0:
        values.pop("top_k")
    return values


def sampling_defaults(model_path: str | Path, model_name: str = "") -> ModelDefaults:
    """The recommended sampling settings of the model in `model_path` (named `model_name`)."""
    config = Path(model_path) / GENERATION_CONFIG
    try:
        data = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else None
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict):
        values = from_generation_config(data)
        if values:
            return ModelDefaults(values, GENERATION_CONFIG)
    names = (model_name, Path(model_path).name)
    for prefix, values in MODEL_CARDS.items():
        if any(n.lower().startswith(prefix.lower()) for n in names if n):
            return ModelDefaults(dict(values), "model card")
    return ModelDefaults()
