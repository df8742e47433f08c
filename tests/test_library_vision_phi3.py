"""Phi-3.5-vision's picture marker on a tokenizer that lacks `<|image|>`: it is added as a
special token, so each picture's place in a rendered prompt is one token, and a user who
types the marker's text writes plain text, not a picture slot."""

from __future__ import annotations

from pathlib import Path


def test_the_marker_is_added_as_one_token_user_text_cannot_write(default_model_dir: Path) -> None:
    from mlx_lm.utils import load_tokenizer
    from mlx_vlm.models.phi3_v import Phi3VImageProcessor, Phi3VProcessor
    from transformers import AutoTokenizer

    from engine.library.vision.phi3 import IMAGE_TOKEN, phi3_family
    from engine.prompt.chat import encode_chat
    from engine.prompt.images import set_image_token, set_image_writer
    from engine.types import ImageInput
    from tests.vision_support import picture

    tokenizer = load_tokenizer(default_model_dir)
    assert IMAGE_TOKEN not in tokenizer._tokenizer.get_vocab()
    processor = Phi3VProcessor(
        Phi3VImageProcessor(), AutoTokenizer.from_pretrained(default_model_dir)
    )
    family = phi3_family("phi3_v", processor, tokenizer)
    assert family.marker == IMAGE_TOKEN and family.image_token_id == -1
    set_image_token(tokenizer, family.marker)
    set_image_writer(tokenizer, lambda role, text, images: family.message(role, text, images, None))
    messages = [
        {
            "role": "user",
            "content": f"Is {IMAGE_TOKEN} a picture?",
            "images": [ImageInput(picture((9, 9, 9)), "a.png")],
        }
    ]
    tokens = encode_chat(tokenizer, messages)
    # the writer's marker is one token; the user's typed one is plain text
    assert tokens.count(family.marker_id) == 1
