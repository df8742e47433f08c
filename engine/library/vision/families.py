"""Which vision family a loaded mlx-vlm model belongs to, by its config's model type."""

from __future__ import annotations

from engine.library.vision.family import VisionFamily
from engine.library.vision.qwen import MODEL_TYPES as QWEN_TYPES
from engine.library.vision.qwen import QwenVLFamily, is_multi_axis


def family_for(model_type: str, vlm: object, marker: str, image_token_id: int) -> VisionFamily:
    """The family object that writes this model's images (LLaVA's way for the rest)."""
    if model_type in QWEN_TYPES or is_multi_axis(vlm):
        return QwenVLFamily(model_type, marker, image_token_id)
    return VisionFamily(model_type, marker, image_token_id)
