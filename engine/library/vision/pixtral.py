"""The Pixtral family (Mistral Small 3.1+, Pixtral): pictures at their own aspect ratio.

The template writes `[IMG]` per picture; the processor turns it into one `[IMG]` per merged
patch, each row ended by `[IMG_BREAK]` and the picture by `[IMG_END]`, and gives the
picture's size (`image_sizes`), by which the vision tower reads only the picture's own
patches. Pictures of different sizes in one prompt are padded to the largest (bottom and
right, as the processor pads a batch): the padding is never read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx

from engine.library.vision.family import Expansion, VisionFamily

MODEL_TYPES = ("mistral3", "pixtral")


class PixtralFamily(VisionFamily):
    """Pixtral images: rows of patches, and pictures of any size side by side."""

    name = "pixtral"

    def combine(self, expansions: Sequence[Expansion]) -> tuple[mx.array, dict[str, Any]]:
        height = max(e.pixel_values.shape[-2] for e in expansions)
        width = max(e.pixel_values.shape[-1] for e in expansions)
        padded = [
            mx.pad(
                e.pixel_values,
                [(0, 0)] * (e.pixel_values.ndim - 2)
                + [(0, height - e.pixel_values.shape[-2]), (0, width - e.pixel_values.shape[-1])],
            )
            for e in expansions
        ]
        pixels = mx.concatenate(padded, axis=0)
        sizes = mx.concatenate([e.extras["image_sizes"] for e in expansions], axis=0)
        return pixels, {"image_sizes": sizes}
