"""The Gemma 3 family: `<start_of_image>` in the text, soft image tokens in the prompt.

mlx-vlm writes `<start_of_image>` after the message's text; Gemma 3's processor replaces it
with a blank line, `<start_of_image>`, a fixed number of `<image_soft_token>`s,
`<end_of_image>` and a blank line. The blank lines are text: they are written around each
marker into the rendered prompt (`rewrite`, after the template, which trims a message's
ends), so the whole prompt is tokenized in one piece as
the processor's tokenizer call does (a newline next to the user's text may join it in one
token), and only the marker becomes the processor's image tokens (`expand`).
"""

from __future__ import annotations

from typing import Any

from engine.library.vision.family import Expansion, VisionFamily

MODEL_TYPES = ("gemma3",)
_BLANK = "\n\n"


class GemmaFamily(VisionFamily):
    """Gemma 3 images: the marker between blank lines, expanded to its soft tokens."""

    name = "gemma3"

    def __init__(
        self, model_type: str, marker: str, image_token_id: int, marker_id: int, end_id: int
    ) -> None:
        super().__init__(model_type, marker, image_token_id, marker_id)
        self.end_id = end_id  # `<end_of_image>`

    def rewrite(self, rendered: str) -> str:
        return rendered.replace(self.marker, _BLANK + self.marker + _BLANK)

    def expand(self, processor: Any, image: Any) -> Expansion:
        whole = super().expand(processor, image)
        start = whole.ids.index(self.marker_id)
        end = whole.ids.index(self.end_id) + 1
        return Expansion(whole.ids[start:end], whole.pixel_values, whole.extras)


def gemma_family(model_type: str, processor: Any, image_token_id: int) -> GemmaFamily:
    """The Gemma 3 family of a loaded processor (its tokenizer names the markers)."""
    tokenizer = processor.tokenizer
    boi, eoi = str(tokenizer.boi_token), str(tokenizer.eoi_token)
    ids = tokenizer.convert_tokens_to_ids([boi, eoi])
    return GemmaFamily(model_type, boi, image_token_id, int(ids[0]), int(ids[1]))
