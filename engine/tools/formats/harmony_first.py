"""gpt-oss's template as first published: Harmony, with an older preamble and history.

Checked against openai/gpt-oss-20b's `chat_template.jinja` as first published (5 August
2025; a mirror's history keeps it), which OpenAI replaced two days later (llama.cpp's
`openai-gpt-oss-120b.jinja`, harmony.py's). The calls are the same Harmony messages, but
its system preamble always names the `functions` channel, its developer message puts the
instructions first, every parameter needs a description, and a past call ends `<|end|>`
where the model ends it `<|call|>` (the reply's end token, so the reply renders back all
the same).
"""

from __future__ import annotations

from engine.tools.formats.harmony import HarmonyFormat


class HarmonyFirstFormat(HarmonyFormat):
    """gpt-oss Harmony (its first template): `<|start|>assistant to=functions.NAME
    <|channel|>commentary json<|message|>{…}<|call|>`, a past call ended `<|end|>`."""

    name = "harmony_first"
    checked_against = ("gpt-oss-first.jinja",)

    @classmethod
    def detect(cls, template: str) -> bool:
        return (
            HarmonyFormat.detect(template) and "<|channel|>commentary json<|message|>" in template
        )
