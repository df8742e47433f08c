"""Which dialect a model speaks: its tool-call syntax and its thinking syntax, in words, for
`python -m engine info` and the model library.

A model whose template has no tool syntax of its own is served calls "described in the
system prompt" (the fallback), and `tool_syntax_why` says why (its template reads no
`tools` and renders no past calls, or renders them in no syntax Corral knows); a native
syntax says what it is and how its template takes history; one that does not think says
so.
"""

from __future__ import annotations

from typing import Any

from engine.prompt.reasoning import describe_reasoning, detect_reasoning, syntax_of
from engine.prompt.templates import template_traits
from engine.prompt.tokenizer import ModelTokenizer
from engine.tools.formats import FORMATS, HermesFormat, choose_format, has_tool_support

DESCRIBED = "described in the system prompt"


def describe_dialect(tokenizer: Any) -> dict[str, Any]:
    """The model's dialect as plain data: `tool_syntax` (the call format's name, or
    "described in the system prompt"), `tool_syntax_native`, `tool_syntax_why` (the syntax
    in words and how its template takes past calls, or why the fallback), `thinking_syntax`
    (a name, or "none"), `thinking` (its ReasoningFormat as a dict, or None) and
    `template_renders_tools`."""
    tok = ModelTokenizer.of(tokenizer)
    fmt = choose_format(tok)
    name = str(getattr(fmt, "name", "") or type(fmt).__name__)
    native = bool(getattr(fmt, "native", False))
    reasoning = detect_reasoning(tok)
    template = tok.chat_template
    return {
        "tool_syntax": name if native else f"{DESCRIBED} ({name} calls)",
        "tool_syntax_native": native,
        "tool_syntax_why": tool_syntax_why(fmt, template or ""),
        "thinking_syntax": (reasoning.syntax or reasoning.kind) if reasoning else "none",
        "thinking": reasoning.to_dict() if reasoning else None,
        "thinking_described": describe_reasoning(reasoning),
        "template_renders_tools": bool(template) and template_traits(template).renders_tools,
    }


def tool_syntax_why(fmt: Any, template: str) -> str:
    """Why the model is served `fmt`, in words: the syntax and how its template takes past
    calls, or why the fallback was chosen."""
    if not getattr(fmt, "native", False):
        if not template:
            why = "the model has no chat template"
        elif not has_tool_support(template):
            why = "its template reads no `tools` and renders no past `tool_calls`"
        else:
            why = "its template renders tools, but in no call syntax Corral knows"
        return (
            f"{why}: the tools are described in the system prompt and calls written as "
            "Hermes <tool_call> JSON"
        )
    what = str(fmt.describe())
    fitted = str(getattr(fmt, "fitted", "") or "")
    return f"{what}; {fitted}" if fitted else what


def template_dialect(template: str) -> tuple[str, str]:
    """(tool syntax, thinking syntax) in words from a chat template's text alone, without a
    tokenizer: what the model library shows before a model is loaded. The tool syntax is
    the one `choose_format` picks on load; "none" where the model does not think."""
    kind = next((k for k in FORMATS if k.detect(template)), None)
    tools = kind.name if kind is not None else f"{DESCRIBED} ({HermesFormat.name} calls)"
    thinking = syntax_of(template)
    return tools, thinking.name if thinking is not None else "none"
