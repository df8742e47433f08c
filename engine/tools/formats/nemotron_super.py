"""Llama 3.3 Nemotron Super: Nemotron's `<TOOLCALL>[…]</TOOLCALL>` in Llama 3 turns.

Checked against nvidia/Llama-3_3-Nemotron-Super-49B-v1_5's template as llama.cpp's
`models/templates/nvidia-Llama-3_3-Nemotron-Super-49B-v1_5.jinja` carries it: the tools
in `<AVAILABLE_TOOLS>` in the system turn, a past call written
`<TOOLCALL>[{"name": …, "arguments": {…}}]</TOOLCALL>` after the turn's text (its
thinking cut off), results in a `tool` turn inside `<TOOL_RESPONSE>[…]`. Thinking is
`<think>…</think>`, switched by `/think` or `/no_think` in the system message (the
template ignores `enable_thinking`). Nemotron Nano v2's turns are json_tags.py's.
"""

from __future__ import annotations

from engine.tools.formats.json_tags import NemotronFormat


class NemotronSuperFormat(NemotronFormat):
    """Llama 3.3 Nemotron Super: `<TOOLCALL>[{"name": …, "arguments": {…}}]</TOOLCALL>`
    in Llama 3 turns."""

    name = "nemotron_super"
    checked_against = ("nemotron-super-v1.5.jinja",)

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<TOOLCALL>" in template and "<|start_header_id|>" in template
