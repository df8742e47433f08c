"""Images through the front ends: the official openai client with data: URLs, the
anthropic client with base64 image blocks, Responses input_image, the CLI's --image; bad
images and text-only models refused with a 400 that says why."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import jsonschema
import openai
import pytest

from tests.server_support import anthropic_client, openai_client, serving
from tests.test_vision import RECEIPT
from tests.vision_support import BAD_IMAGES, png

REPO = Path(__file__).resolve().parents[1]


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64," + base64.b64encode(data).decode()


def image_message(data: bytes, text: str = "What is on this receipt?") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": data_url(data)}},
            {"type": "text", "text": text},
        ],
    }


def test_openai_image_with_schema_and_follow_up(vision_engine: Any) -> None:
    with serving(vision_engine, serve_any_model_name=True) as server:
        client = openai_client(server)
        first = client.chat.completions.create(
            model="any",
            messages=[image_message(png((90, 70), (1, 2, 3)))],  # type: ignore[list-item]
            max_tokens=60,
            temperature=0,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "receipt", "schema": RECEIPT},
            },
        )
        text = first.choices[0].message.content or ""
        jsonschema.validate(json.loads(text), RECEIPT)
        follow = client.chat.completions.create(
            model="any",
            messages=[
                image_message(png((90, 70), (1, 2, 3))),  # type: ignore[list-item]
                {"role": "assistant", "content": text},
                {"role": "user", "content": "And the date?"},
            ],
            max_tokens=4,
            temperature=0,
        )
        assert first.usage is not None and follow.usage is not None
        details = follow.usage.prompt_tokens_details
        assert details is not None and details.cached_tokens is not None
        assert details.cached_tokens >= first.usage.prompt_tokens - 1


@pytest.mark.parametrize("kind", sorted(BAD_IMAGES))
def test_openai_bad_image_is_a_400_with_its_reason(vision_engine: Any, kind: str) -> None:
    data, words = BAD_IMAGES[kind]
    with serving(vision_engine, serve_any_model_name=True) as server:
        with pytest.raises(openai.BadRequestError) as caught:
            openai_client(server).chat.completions.create(
                model="any",
                messages=[image_message(data)],
                max_tokens=4,  # type: ignore[list-item]
            )
    message = str(caught.value)
    assert "messages[0].content[0]" in message
    for word in words:
        assert word in message


def test_remote_image_urls_are_off_unless_allowed_and_never_local(vision_engine: Any) -> None:
    remote = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/x.png"}}],
    }
    with serving(vision_engine, serve_any_model_name=True) as server:
        with pytest.raises(openai.BadRequestError, match="--allow-image-urls"):
            openai_client(server).chat.completions.create(
                model="any",
                messages=[remote],
                max_tokens=4,  # type: ignore[list-item]
            )
    with serving(vision_engine, allow_image_urls=True, serve_any_model_name=True) as server:
        with pytest.raises(openai.BadRequestError, match="private or local address"):
            openai_client(server).chat.completions.create(
                model="any",
                messages=[remote],
                max_tokens=4,  # type: ignore[list-item]
            )


def test_anthropic_base64_image_block(vision_engine: Any) -> None:
    block = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(png()).decode(),
        },
    }
    with serving(vision_engine, serve_any_model_name=True) as server:
        client = anthropic_client(server)
        reply = client.messages.create(
            model="any",
            max_tokens=6,
            messages=[{"role": "user", "content": [block, {"type": "text", "text": "What?"}]}],
        )
        assert reply.usage.input_tokens > 64  # the image's 64 tokens are in the prompt
        bad = dict(block, source=dict(block["source"], data=base64.b64encode(b"nope").decode()))
        with pytest.raises(anthropic.BadRequestError, match="not an image"):
            client.messages.create(
                model="any", max_tokens=4, messages=[{"role": "user", "content": [bad]}]
            )


def test_responses_input_image(vision_engine: Any) -> None:
    with serving(vision_engine, serve_any_model_name=True) as server:
        response = openai_client(server).responses.create(
            model="any",
            max_output_tokens=6,
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_image", "image_url": data_url(png()), "detail": "auto"},
                        {"type": "input_text", "text": "Describe it."},
                    ],
                }
            ],
        )
        assert response.usage is not None and response.usage.input_tokens > 64


def test_text_only_model_answers_images_with_a_clear_400(tiny_engine: Any) -> None:
    with serving(tiny_engine, serve_any_model_name=True) as server:
        with pytest.raises(openai.BadRequestError, match="does not read images"):
            openai_client(server).chat.completions.create(
                model="any",
                messages=[image_message(png())],
                max_tokens=4,  # type: ignore[list-item]
            )


def _chat(model: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", "chat", "--model", str(model), "--max-tokens", "4"]
        + ["--temperature", "0", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_image_and_bad_images(vision_model_dir: Path, tmp_path: Path) -> None:
    good = tmp_path / "photo.png"
    good.write_bytes(png())
    done = _chat(vision_model_dir, "--prompt", "What is it?", "--image", str(good), "--json")
    assert done.returncode in (0, 3), done.stderr  # 3: cut at its 4 tokens
    assert json.loads(done.stdout)["stats"]["prompt_tokens"] > 64
    for kind, (data, words) in BAD_IMAGES.items():
        bad = tmp_path / f"{kind.replace(' ', '_')}.png"
        bad.write_bytes(data)
        done = _chat(vision_model_dir, "--prompt", "What is it?", "--image", str(bad))
        assert done.returncode == 2, (kind, done.stderr)
        assert str(bad) in done.stderr and all(w in done.stderr for w in words), done.stderr
