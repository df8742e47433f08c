"""The Phi-3.5-vision family: numbered `<|image_N|>` markers, pictures found by negative ids.

mlx-vlm's formatter writes `<|image_1|>`, `<|image_2|>`, ... before a user message's text;
the processor splits the prompt at those markers, tokenizes the text between them, and
writes `-N` once per image token of picture N (a 336-pixel global view and the picture's
tiles, 144 tokens each, with separators), which is how the model finds the pictures
(`inputs < 0`: the number itself is never read). Corral writes the tokenizer's own image
token `<|image|>` where the formatter puts each numbered marker, so the rendered prompt
splits at it as the processor splits at the numbered ones, and asks the processor for each
picture's run of negative ids (`expand`, on `<|image_1|>`).
"""

from __future__ import annotations

import re
from typing import Any

from engine.library.vision.family import Expansion, VisionFamily

MODEL_TYPES = ("phi3_v",)
IMAGE_TOKEN = "<|image|>"  # Phi-3.5-vision's tokenizer's special image token
IMAGE_ID = -1  # what the processor writes for the first picture's tokens
_NUMBERED = re.compile(r"<\|image_\d+\|>")


class Phi3VisionFamily(VisionFamily):
    """Phi-3.5-vision images: one marker each, expanded to the processor's negative ids."""

    name = "phi3_v"
    bos = ""  # the BOS text the processor's tokenizer adds in front of a prompt, if any

    def message(self, role: str, text: str, images: int, template: str | None) -> Any:
        content = super().message(role, text, images, template)
        if isinstance(content, str):  # the numbered markers, numbered again by the processor
            return _NUMBERED.sub(lambda _: self.marker, content)
        return content

    def rewrite(self, rendered: str) -> str:
        # the processor's tokenizer call adds the BOS the template does not write
        if self.bos and not rendered.startswith(self.bos):
            return self.bos + rendered
        return rendered

    def expand(self, processor: Any, image: Any) -> Expansion:
        # the processor reads numbered markers only; the first picture of a one-picture
        # prompt gives the run of -1 every picture's positions are read as
        numbered = type(self)(self.model_type, "<|image_1|>", self.image_token_id)
        whole = VisionFamily.expand(numbered, processor, image)
        return Expansion([t for t in whole.ids if t == IMAGE_ID], whole.pixel_values, whole.extras)


def phi3_family(model_type: str, processor: Any, tokenizer: Any) -> Phi3VisionFamily:
    """The Phi-3.5-vision family, its marker the tokenizer's `<|image|>` (added where the
    tokenizer lacks it, so a marker is always one token that untrusted text cannot write)."""
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    if IMAGE_TOKEN not in hf.get_vocab():
        hf.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    marker_id = int(hf.convert_tokens_to_ids(IMAGE_TOKEN))
    family = Phi3VisionFamily(model_type, IMAGE_TOKEN, IMAGE_ID, marker_id)
    own = processor.tokenizer
    if own.bos_token is not None and own.encode("")[:1] == [own.bos_token_id]:
        family.bos = str(own.bos_token)
    return family
