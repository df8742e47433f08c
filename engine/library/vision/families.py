"""Which vision family a loaded mlx-vlm model belongs to, by its config's model type."""

from __future__ import annotations

from typing import Any

from engine.library.vision.family import VisionFamily
from engine.library.vision.gemma import GEMMA4_TYPES, gemma4_family, gemma_family
from engine.library.vision.gemma import MODEL_TYPES as GEMMA_TYPES
from engine.library.vision.idefics import MODEL_TYPES as IDEFICS_TYPES
from engine.library.vision.idefics import IdeficsFamily
from engine.library.vision.pixtral import MODEL_TYPES as PIXTRAL_TYPES
from engine.library.vision.pixtral import PixtralFamily
from engine.library.vision.qwen import MODEL_TYPES as QWEN_TYPES
from engine.library.vision.qwen import QwenVLFamily, is_multi_axis


def family_for(model_type: str, vlm: Any, processor: Any, image_token_id: int) -> VisionFamily:
    """The family object that writes this model's images (LLaVA's way for the rest: the
    processor's image token, repeated by the processor)."""
    marker = str(processor.image_token)
    if model_type in GEMMA4_TYPES:
        return gemma4_family(model_type, vlm, processor, image_token_id)
    if model_type in GEMMA_TYPES:
        return gemma_family(model_type, processor, image_token_id)
    if model_type in IDEFICS_TYPES:
        return IdeficsFamily(model_type, marker, image_token_id)
    if model_type in PIXTRAL_TYPES:
        return PixtralFamily(model_type, marker, image_token_id)
    if model_type in QWEN_TYPES or is_multi_axis(vlm):
        return QwenVLFamily(model_type, marker, image_token_id)
    return VisionFamily(model_type, marker, image_token_id)
