"""Vision-language models: loaded by mlx-vlm, their pictures written as each family's own
processor writes them, decoded by Corral's own runtime.

`model` loads a vision folder and wraps its language model for the runtime; `family` is how
a family writes an image into a prompt (the message, the processor's expansion, the
positions), with one module per family that differs (`qwen`: 3-D rotary positions;
`gemma`: Gemma 3 and 4; `pixtral`; `idefics`; `phi3`: Phi-3.5-vision's numbered markers);
`families` picks one by the model type (Phi-3.5-vision's at load, from its tokenizer).
"""

from engine.library.vision.family import Expansion, ImageProcessorError, Positions, VisionFamily
from engine.library.vision.model import (
    VisionParts,
    VisionTextModel,
    is_vision_folder,
    load_vision_model,
    vision_parts,
)

__all__ = [
    "Expansion",
    "ImageProcessorError",
    "Positions",
    "VisionFamily",
    "VisionParts",
    "VisionTextModel",
    "is_vision_folder",
    "load_vision_model",
    "vision_parts",
]
