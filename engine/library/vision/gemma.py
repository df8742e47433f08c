"""The Gemma 3 and Gemma 4 families: soft image tokens between image markers.

mlx-vlm writes `<start_of_image>` after the message's text; Gemma 3's processor replaces it
with a blank line, `<start_of_image>`, a fixed number of `<image_soft_token>`s,
`<end_of_image>` and a blank line. The blank lines are text: they are written around each
marker into the rendered prompt (`rewrite`, after the template, which trims a message's
ends), so the whole prompt is tokenized in one piece as
the processor's tokenizer call does (a newline next to the user's text may join it in one
token), and only the marker becomes the processor's image tokens (`expand`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import ModelLoadError
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


GEMMA4_TYPES = ("gemma4",)


class Gemma4Family(VisionFamily):
    """Gemma 4 images: `<|image|>` placed by the template, expanded by the processor to
    `<|image>`, the picture's soft tokens (as many as its aspect ratio gives) and
    `<image|>`; the patches' positions (`image_position_ids`) go with the pixels, and the
    per-layer token inputs the model computes for the whole prompt are fed to each
    prefill chunk's layers (a chunk of text alone computes its own from its tokens)."""

    name = "gemma4"

    def expand(self, processor: Any, image: Any) -> Expansion:
        whole = super().expand(processor, image)
        # per-token types of the processor's one-picture prompt: the prompt's, not the image's
        extras = {k: v for k, v in whole.extras.items() if k != "mm_token_type_ids"}
        return Expansion(whole.ids, whole.pixel_values, extras)

    def combine(self, expansions: Sequence[Expansion]) -> tuple[Any, dict[str, Any]]:
        """Pictures of one size as one array; of different sizes as a list, each read by
        the vision tower on its own (as the processor gives them)."""
        if len({e.pixel_values.shape for e in expansions}) == 1:
            return super().combine(expansions)
        return [e.pixel_values[0] for e in expansions], {}

    def layer_inputs(self, features: Mapping[str, Any], start: int, end: int) -> dict[str, Any]:
        per_layer = features.get("per_layer_inputs")
        return {} if per_layer is None else {"per_layer_inputs": per_layer[:, start:end]}


def gemma4_family(model_type: str, vlm: Any, processor: Any, image_token_id: int) -> Gemma4Family:
    """The Gemma 4 family; a model whose pictures attend to each other both ways (its text
    config's `use_bidirectional_attention`) is refused: a prefill chunk that splits a
    picture, or a picture's cached prefix, would see it one way only."""
    text = getattr(getattr(vlm, "config", None), "text_config", None)
    if getattr(text, "use_bidirectional_attention", None) == "vision":
        raise ModelLoadError(
            "this Gemma 4 model lets a picture's tokens attend to each other both ways, "
            "which Corral's chunked prefill and prompt cache cannot keep yet"
        )
    return Gemma4Family(model_type, str(processor.image_token), image_token_id)
