"""Tool-call formats: how a model writes calls, chosen from its chat template and tokenizer.

One module per call syntax (JSON in tags, XML parameters, Harmony, DeepSeek, Kimi, Mistral,
Llama, pythonic, Gemma 4); `FORMATS` is the registry, checked in order, and `choose_format`
picks one for a model once, at load: the prompt, the grammar, the parser and the history
all come from that one object. Adding a format = one class + one entry in `FORMATS`.
"""

from __future__ import annotations

import weakref
from typing import Any

from engine.prompt.tokenizer import ModelTokenizer
from engine.tools.formats.base import Marker, RawCall, Schemas, ToolFormat
from engine.tools.formats.deepseek import DeepSeekR1Format, DeepSeekV31Format
from engine.tools.formats.fitting import fit_template
from engine.tools.formats.gemma4 import Gemma4Format
from engine.tools.formats.harmony import HarmonyFormat
from engine.tools.formats.json_tags import (
    ApertusFormat,
    AprielFormat,
    CommandR7BFormat,
    Granite33Format,
    HermesFormat,
    Lfm2Format,
    NemotronFormat,
    Phi4Format,
)
from engine.tools.formats.kimi import KimiK2Format
from engine.tools.formats.llama import FunctionaryFormat, Llama3JsonFormat
from engine.tools.formats.mistral import MistralArgsFormat, MistralCallIdFormat, MistralFormat
from engine.tools.formats.pythonic import OlmoFormat, PythonicFormat
from engine.tools.formats.xml_params import (
    DsmlFormat,
    GlmFormat,
    KimiK3Format,
    MiniMaxFormat,
    QwenXmlFormat,
    SeedXmlFormat,
)

# Checked in order; the first match wins. Specific markers first: XML parameters and GLM
# write `<tool_call>` too (so before Hermes), Seed-OSS's template has Qwen's `<function=`
# inside its own `<seed:tool_call>` (so before Qwen), Functionary uses Llama 3 headers, and the
# Llama 3 JSON check is the loosest, so it is last.
FORMATS: list[type[ToolFormat]] = [
    HarmonyFormat,
    DsmlFormat,
    KimiK3Format,
    MiniMaxFormat,
    GlmFormat,
    SeedXmlFormat,
    QwenXmlFormat,
    DeepSeekR1Format,
    DeepSeekV31Format,
    KimiK2Format,
    Gemma4Format,
    MistralCallIdFormat,
    MistralArgsFormat,
    MistralFormat,
    CommandR7BFormat,
    ApertusFormat,
    Granite33Format,
    Phi4Format,
    Lfm2Format,
    NemotronFormat,
    AprielFormat,
    OlmoFormat,
    FunctionaryFormat,
    HermesFormat,
    PythonicFormat,
    Llama3JsonFormat,
]


def has_tool_support(template: str) -> bool:
    """Whether a chat template renders tools at all (reads `tools` or past `tool_calls`)."""
    return "tools" in template or "tool_calls" in template


def choose_format(tokenizer: Any) -> ToolFormat:
    """The call format for a tokenizer (an mlx-lm TokenizerWrapper or an HF tokenizer).

    A template that renders one of the known formats is used natively; anything else
    (ChatML without tools, no template) gets the Hermes format with the tools described
    in the system prompt.
    """
    tok = ModelTokenizer.of(tokenizer)
    template = tok.chat_template or ""
    try:
        chosen = _CHOSEN.get(tok.source)
    except TypeError:  # a tokenizer that cannot be weakly referenced: no cache
        chosen = None
    if chosen is not None and chosen._template == template:
        return chosen
    chosen = next(
        (cls(tok, native=True) for cls in FORMATS if cls.detect(template)),
        HermesFormat(tok, native=False),
    )
    fit_template(chosen)
    try:
        _CHOSEN[tok.source] = chosen
    except TypeError:
        pass
    return chosen


# One format object per loaded tokenizer: every request, dialect and MCP loop of a model
# uses the same one (it is chosen again only if the template changes).
_CHOSEN: weakref.WeakKeyDictionary[Any, ToolFormat] = weakref.WeakKeyDictionary()


__all__ = [
    "FORMATS",
    "HermesFormat",
    "Llama3JsonFormat",
    "Marker",
    "MistralFormat",
    "RawCall",
    "Schemas",
    "ToolFormat",
    "choose_format",
    "has_tool_support",
]
