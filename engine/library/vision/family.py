"""How one vision family writes a picture into a prompt, the way mlx-vlm's reference does.

A `VisionFamily` answers three questions for the runtime, each by asking mlx-vlm or the
model's own processor rather than knowing the answer itself:

- `message`: a user message's text and its pictures as the chat template wants them
  (mlx-vlm's `get_message_json` for the model type: content parts such as
  `[{"type": "text"}, {"type": "image"}]` for templates that place images themselves, or the
  image marker in the text);
- `expand`: what one image becomes in the prompt and what the vision tower reads, by the
  processor's own call on the family's marker (`Expansion`: token ids, pixel values and
  the processor's other outputs such as Qwen's grid);
- `positions`: the rotary positions of a prompt, for families whose positions are not
  simply 0, 1, 2, ... (None here; Qwen2-VL's 3-D positions in `engine.library.vision.qwen`).

The base class serves LLaVA-style families (one marker expanded by the processor, plain
positions); a family module overrides what differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx


class ImageProcessorError(ValueError):
    """The model's processor refused an image (its own size or mode checks)."""


@dataclass(frozen=True)
class Expansion:
    """One image as the processor writes it: its prompt token ids (the image positions
    hold the family's image token), its pixel values, and the processor's other outputs
    (`image_grid_thw`, `image_sizes`, ...) keyed as `get_input_embeddings` reads them."""

    ids: list[int]
    pixel_values: mx.array
    extras: dict[str, mx.array] = field(default_factory=dict)


@dataclass(frozen=True)
class Positions:
    """A prompt's rotary positions (axes, 1, tokens) and the offset its images introduced:
    the text after the prompt continues at `len(prompt) + delta`."""

    ids: mx.array
    delta: int


# Processor outputs that are the prompt's text, not the image's.
_TEXT_KEYS = frozenset({"input_ids", "attention_mask", "token_type_ids", "pixel_values"})


class VisionFamily:
    """A vision family's prompt expansion (the LLaVA way unless a subclass says otherwise)."""

    name = "llava"

    def __init__(
        self, model_type: str, marker: str, image_token_id: int, marker_id: int | None = None
    ) -> None:
        self.model_type = model_type
        self.marker = marker  # what the template leaves per image, before expansion
        self.image_token_id = image_token_id  # what the processor repeats per image feature
        # the marker's token id (the image token itself where the processor repeats it)
        self.marker_id = image_token_id if marker_id is None else marker_id

    # ---- the message ----

    def message(self, role: str, text: str, images: int, template: str | None) -> Any:
        """The content of a `role` message holding `text` and `images` pictures, as mlx-vlm
        builds it for this model type; the marker in the text when the chat template does
        not place images itself (it never mentions them)."""
        from mlx_vlm.prompt_utils import MODEL_CONFIG, get_message_json

        if self.model_type in MODEL_CONFIG:
            built = get_message_json(self.model_type, text, role, num_images=images)
            content = built.get("content") if isinstance(built, Mapping) else built
            if isinstance(content, str):
                return content
            if isinstance(content, list) and template is not None and "image" in template:
                return content
        return self.marker * images + ("\n" + text if text else "")

    def rewrite(self, rendered: str) -> str:
        """The rendered prompt with the text the processor writes around each marker (a
        marker in it is always the template's: untrusted text holds placeholders)."""
        return rendered

    # ---- one image ----

    def expand(self, processor: Any, image: Any) -> Expansion:
        """One image through the processor's own call on the family's marker."""
        try:
            batch = processor(text=[self.marker], images=[image])
        except Exception as exc:  # the processor's own checks (sizes, modes)
            raise ImageProcessorError(
                f"the model's image processor refused the image: {exc}"
            ) from exc
        ids = [int(t) for t in _first_row(batch["input_ids"])]
        bos = getattr(getattr(processor, "tokenizer", None), "bos_token_id", None)
        if ids and ids[0] == bos and bos != self.image_token_id:
            ids = ids[1:]  # the processor's tokenizer call added one; the template wrote ours
        extras = {
            k: _as_array(v) for k, v in dict(batch).items() if k not in _TEXT_KEYS and v is not None
        }
        return Expansion(ids, _as_array(batch["pixel_values"]), extras)

    def combine(self, expansions: Sequence[Expansion]) -> tuple[mx.array, dict[str, Any]]:
        """The pixel values and extra inputs of a prompt's images, in prompt order."""
        pixels = mx.concatenate([e.pixel_values for e in expansions], axis=0)
        keys = expansions[0].extras.keys()
        extras = {k: mx.concatenate([e.extras[k] for e in expansions], axis=0) for k in keys}
        return pixels, extras

    def layer_inputs(self, features: Mapping[str, Any], start: int, end: int) -> dict[str, Any]:
        """What the language model reads inside its layers for prompt positions
        [start, end), from the model's input features of the whole prompt (none here)."""
        return {}

    # ---- positions ----

    def positions(self, vlm: Any, tokens: mx.array, extras: Mapping[str, Any]) -> Positions | None:
        """The prompt's rotary positions; None: 0, 1, 2, ... as for text."""
        return None


def _as_array(values: Any) -> mx.array:
    return values if isinstance(values, mx.array) else mx.array(values)


def _first_row(values: Any) -> list[Any]:
    if isinstance(values, mx.array):
        row: list[Any] = values[0].tolist()  # type: ignore[assignment]
        return row
    return list(values[0])
