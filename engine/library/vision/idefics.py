"""The Idefics3 family (SmolVLM, Idefics3): a picture split into tiles plus a global view.

The processor writes each tile as `<fake_token_around_image><row_R_col_C>` and its image
tokens, rows ended by a newline, then the global view; its pixel values are (1, tiles,
channels, height, width) with a mask of each tile's real pixels. Several pictures in one
prompt are one row of all their tiles, in prompt order, as the processor gives a prompt
with several pictures (their tile counts may differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx

from engine.library.vision.family import Expansion, VisionFamily

MODEL_TYPES = ("idefics3", "smolvlm")


class IdeficsFamily(VisionFamily):
    """Idefics3 images: every picture's tiles side by side in one row."""

    name = "idefics3"

    def combine(self, expansions: Sequence[Expansion]) -> tuple[mx.array, dict[str, Any]]:
        pixels = mx.concatenate([_tiles(e.pixel_values) for e in expansions], axis=1)
        extras: dict[str, Any] = {}
        if all("pixel_attention_mask" in e.extras for e in expansions):
            masks = [_tiles(e.extras["pixel_attention_mask"]) for e in expansions]
            extras["pixel_attention_mask"] = mx.concatenate(masks, axis=1)
        return pixels, extras


def _tiles(values: mx.array) -> mx.array:
    """`values` as one row of tiles: (1, tiles, ...)."""
    return values.reshape(1, -1, *values.shape[-3:]) if values.ndim == 5 else values[None]
