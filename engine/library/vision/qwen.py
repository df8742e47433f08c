"""The Qwen-VL family (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5): 3-D rotary positions.

The template writes `<|vision_start|><|image_pad|><|vision_end|>` per image; the processor
repeats the pad once per merged patch and gives the image's grid (time, height, width).
Inside an image the positions run over the grid's three axes, so the image takes fewer
positions than tokens, and the text after it continues at `index + delta` (delta <= 0).
The positions of a prompt are mlx-vlm's own (`language_model.get_rope_index`), computed
from the prompt's tokens and its images' grids: a pure function of the request, so a
cached prefix, a follow-up, a regenerate, a restored disk-tier entry and a chunk that
splits an image all get the positions the whole prompt has. Decoding continues at the
cache's offset plus the prompt's delta (`VisionTextModel`, `rope_deltas`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mlx.core as mx

from engine.library.vision.family import Positions, VisionFamily

MODEL_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")


class QwenVLFamily(VisionFamily):
    """Qwen-VL images: the processor's pads and grid, and mlx-vlm's 3-D positions."""

    name = "qwen_vl"

    def positions(self, vlm: Any, tokens: mx.array, extras: Mapping[str, Any]) -> Positions:
        grid = extras.get("image_grid_thw")
        ids, deltas = vlm.language_model.get_rope_index(tokens, image_grid_thw=grid)
        if ids.ndim == 2:  # no image: (batch, tokens) on every axis
            ids = mx.broadcast_to(ids[None], (3, *ids.shape))
        delta: list[int] = mx.array(deltas).reshape(-1).astype(mx.int32).tolist()  # type: ignore[assignment]
        return Positions(ids, int(delta[0]))

    def layer_inputs(self, features: Mapping[str, Any], start: int, end: int) -> dict[str, Any]:
        """Qwen3-VL's deepstack: the vision tower's earlier features, added to the image
        positions' hidden states in the first layers; the chunk's own rows of them."""
        deep = features.get("deepstack_visual_embeds")
        visual = features.get("visual_pos_masks")
        if deep is None or visual is None:
            return {}
        mask = visual[:, start:end]
        before = int(visual[:, :start].sum().item())
        count = int(mask.sum().item())
        if not count:
            return {}
        return {
            "visual_pos_masks": mask,
            "deepstack_visual_embeds": [layer[before : before + count] for layer in deep],
        }


def is_multi_axis(vlm: Any) -> bool:
    """Whether `vlm`'s language model takes multi-axis positions (mlx-vlm's M-RoPE)."""
    return hasattr(getattr(vlm, "language_model", None), "get_rope_index")
