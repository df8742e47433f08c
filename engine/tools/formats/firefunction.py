"""FireFunction v2: the reply's text, then ` functools[…]`, a JSON list of calls.

Checked against fireworks-ai/llama-3-firefunction-v2's template as llama.cpp's
`models/templates/fireworks-ai-llama-3-firefunction-v2.jinja` carries it. The template
reads `functions` (the tools as JSON text) and `datetime`, not `tools`
(engine.prompt.templates gives both), and writes a past call's arguments as the JSON text
they arrive as; it closes the list with nothing but `]`. The grammar writes the space
before `functools` as the template does; a reply read back may have lost it (detokenizers
drop a reply's leading space).
"""

from __future__ import annotations

from typing import Any

from engine.tools.formats.base import RawCall, Schemas
from engine.tools.formats.json_tags import JsonListFormat


class FireFunctionFormat(JsonListFormat):
    """FireFunction v2: ` functools[{"name": …, "arguments": {…}}, …]` after the text (its
    template reads the tools as `functions`)."""

    name = "firefunction_v2"
    opener = " functools"
    history_arguments = "string"
    checked_against = ("firefunction-v2.jinja",)

    def __init__(self, tokenizer: Any, native: bool) -> None:
        super().__init__(tokenizer, native)
        self.stream_openers = (("functools", True),)  # type: ignore[misc]

    @classmethod
    def detect(cls, template: str) -> bool:
        return " functools[" in template

    def parse(self, text: str, schemas: Schemas | None = None) -> tuple[str, list[RawCall]]:
        return super().parse(text if text.startswith(" ") else " " + text, schemas)
