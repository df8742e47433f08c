"""Tool-call formats: how a model writes calls, chosen from its chat template and tokenizer.

One module per call syntax (JSON in tags, XML parameters, Harmony, DeepSeek, Kimi, Mistral,
Llama, pythonic, Gemma 4, Command R+, FireFunction, Functionary v3.1, Nemotron Super,
MiroThinker, ...); `FORMATS` is the registry, checked in order, and `choose_format` picks
one for a model once, at load, and fits it to the template (`fitting`): the prompt, the
grammar, the parser and the history all come from that one object. Each names the public
templates it is checked against (`checked_against`, files in the shared dataset or
`tests/fixtures/chat-templates`). Adding a family = one module with its class, one entry
in `FORMATS` and its template as a test fixture.
"""

from __future__ import annotations

import weakref
from typing import Any

from engine.prompt.tokenizer import ModelTokenizer
from engine.tools.formats.base import Marker, RawCall, Schemas, ToolFormat
from engine.tools.formats.command_r_plus import CommandRPlusFormat
from engine.tools.formats.deepseek import DeepSeekR1Format, DeepSeekV31Format
from engine.tools.formats.deepseek_r1_llamacpp import DeepSeekR1LlamaCppFormat
from engine.tools.formats.firefunction import FireFunctionFormat
from engine.tools.formats.fitting import fit_template
from engine.tools.formats.functionary_v31 import FunctionaryV31Format
from engine.tools.formats.gemma4 import Gemma4Format
from engine.tools.formats.harmony import HarmonyFormat
from engine.tools.formats.harmony_first import HarmonyFirstFormat
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
from engine.tools.formats.mirothinker import MiroThinkerFormat
from engine.tools.formats.mistral import MistralArgsFormat, MistralCallIdFormat, MistralFormat
from engine.tools.formats.nemotron_super import NemotronSuperFormat
from engine.tools.formats.pythonic import OlmoFormat, PythonicFormat
from engine.tools.formats.xml_params import (
    DsmlFormat,
    GlmFormat,
    KimiK3Format,
    MiniMaxFormat,
    QwenXmlFormat,
    SeedXmlFormat,
)

# Checked in order; the first match wins. Specific markers first: the first gpt-oss template
# before the current one, MiroThinker's template and XML parameters and GLM write
# `<tool_call>` too (so before Hermes), Seed-OSS's template has Qwen's `<function=` inside
# its own `<seed:tool_call>` (so before Qwen), llama.cpp's DeepSeek R1 template is R1's with
# a twist, Nemotron Super is Nemotron in Llama 3 turns, Functionary and FireFunction use
# Llama 3 headers, and the Llama 3 JSON check is the loosest, so it is last.
FORMATS: list[type[ToolFormat]] = [
    HarmonyFirstFormat,
    HarmonyFormat,
    MiroThinkerFormat,
    CommandRPlusFormat,
    DsmlFormat,
    KimiK3Format,
    MiniMaxFormat,
    GlmFormat,
    SeedXmlFormat,
    QwenXmlFormat,
    DeepSeekR1LlamaCppFormat,
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
    NemotronSuperFormat,
    NemotronFormat,
    AprielFormat,
    OlmoFormat,
    FunctionaryV31Format,
    FunctionaryFormat,
    FireFunctionFormat,
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
