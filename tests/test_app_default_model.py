"""The window with the real default model: a short Markdown answer rendered (code block in
a fixed font with a copy link) and a reply constrained by a dropped JSON schema that
validates. Also saves the screenshots a reviewer looks at first."""

from __future__ import annotations

import json

import jsonschema
from app_helpers import (
    close_window,
    drop_files,
    make_window,
    screenshot,
    set_sampling,
    wait_idle,
)
from PySide6.QtGui import QGuiApplication

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "country": {"type": "string", "maxLength": 20},
    },
    "required": ["city", "country"],
    "additionalProperties": False,
}


def test_real_model_markdown_and_schema(qtbot, tmp_path, default_engine):
    window = make_window(qtbot, tmp_path, default_engine)
    set_sampling(window, temperature=0.0, max_tokens=48, seed=0)
    window.send("Show a Python one-liner that prints hello, as a code block.")
    wait_idle(qtbot, window, timeout=120_000)
    reply = window.chat.message_widgets()[-1]
    assert reply.message.content.strip()
    if "```" in reply.message.content:  # the model chose a fenced block: it is copyable
        block = reply.body.code_views()[0]
        block.copy_button.click()
        assert QGuiApplication.clipboard().text() == block.code
    screenshot(window, "real_model_markdown")

    path = tmp_path / "place.json"
    path.write_text(json.dumps(SCHEMA, indent=2))
    assert drop_files(window, [path])
    qtbot.waitUntil(window.constraint_bar.chip.isVisible, timeout=10_000)
    set_sampling(window, temperature=0.0, max_tokens=40)
    window.send("Where is the Eiffel Tower? Answer in JSON.")
    wait_idle(qtbot, window, timeout=120_000)
    reply = window.chat.message_widgets()[-1]
    value = json.loads(reply.message.content)
    jsonschema.validate(value, SCHEMA)
    assert reply.tag.text() == "Reply as: place.json (JSON schema)"
    screenshot(window, "real_model_constrained")
    close_window(window)
