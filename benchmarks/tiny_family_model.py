"""Tiny random models that speak a real family's chat template, for the families tests and
the `families` benchmark.

Each model is the tiny random llama (one set of weights, shared by every family: its
vocabulary is padded to fit any family's added tokens) with the default model's tokenizer
plus the family's markers as added tokens and the family's chat template, read in place
from `../shared/datasets/chat-templates`. The markers are found in the template itself:
`<|…|>`, `<｜…｜>`, Gemma 4's `<|x>`/`<x|>`, Mistral's `[UPPER_CASE]`, `<SPECIAL_N>` and a
few XML-like tags the families have as single tokens (`<tool_call>`, `<think>`, …).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from benchmarks.tiny_model import build_tiny_model

# Room for any family's markers above the default vocabulary.
SPARE_TOKENS = 512

_SPECIAL = [
    r"<\|[^|\s<>]{1,40}\|>",  # <|im_start|>, <|tool_call|>, <|"|>
    r"<｜[^｜<>]{1,40}｜>",  # DeepSeek's full-width bars
    r"<\|[a-z_]{1,30}>",  # Gemma 4: <|turn>, <|tool_call>
    r"<[a-z_]{1,30}\|>",  # Gemma 4: <turn|>, <tool_call|>
    r"\[/?[A-Z][A-Z_]{1,30}\]",  # Mistral: [INST], [TOOL_CALLS], [ARGS]
    r"<SPECIAL_\d+>",  # Nemotron
    r"\]~!?b[\[\]]|\[e~\[",  # MiniMax's turn markers
]
# XML-like tags that families have as single (ordinary added) tokens.
_TAGS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    "<TOOLCALL>",
    "</TOOLCALL>",
    "<tool_calls>",
    "</tool_calls>",
    "<function_calls>",
    "</function_calls>",
    "<seed:bos>",
    "<seed:eos>",
    "<seed:tool_call>",
    "</seed:tool_call>",
    "<seed:think>",
    "</seed:think>",
)


def template_markers(template: str) -> tuple[list[str], list[str]]:
    """(special markers, ordinary added tags) a template writes, and those of the call
    syntax Corral reads in it (a family's tokenizer has its call markers even where its
    template never writes one: gpt-oss's first template ends past calls with `<|end|>`, the
    model with `<|call|>`; Kimi K2's first template renders no past call)."""
    text = template + _call_syntax_text(template)
    special: set[str] = set()
    for pattern in _SPECIAL:
        special.update(re.findall(pattern, text))
    tags = [t for t in _TAGS if t in text and t not in special]
    return sorted(special), tags


def _call_syntax_text(template: str) -> str:
    """A call written in the syntax Corral serves `template` (empty for the fallback)."""
    from engine.tools.formats import FORMATS

    kind = next((k for k in FORMATS if k.detect(template)), None)
    if kind is None:
        return ""
    return kind(None, native=True).calls_as_text([("get_weather", {"city": "Paris"})])  # type: ignore[arg-type]


def build_family_tokenizer(out_dir: Path, tokenizer_dir: Path, template: str) -> Path:
    """The default tokenizer with the template's markers added and `template` set."""
    from transformers import AutoTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    special, tags = template_markers(template)
    if special:
        tok.add_special_tokens({"additional_special_tokens": special})
    if tags:
        tok.add_tokens(tags, special_tokens=False)
    tok.chat_template = template
    tok.save_pretrained(str(out_dir))
    return out_dir


def build_family_models(
    out_dir: str | Path, tokenizer_dir: str | Path, templates: list[Path]
) -> dict[str, Path]:
    """A model folder per template (by file stem) under `out_dir`, all sharing one set of
    tiny random weights."""
    out = Path(out_dir)
    weights = out / "_weights"
    padded = out / "_padded_tokenizer"
    padded.mkdir(parents=True, exist_ok=True)
    source = json.loads((Path(tokenizer_dir) / "tokenizer.json").read_text())
    vocab = len(source["model"]["vocab"]) + SPARE_TOKENS
    # The weights are built once, for a vocabulary with room for every family's markers.
    source["added_tokens"] = [
        *source.get("added_tokens", []),
        {
            "id": vocab - 1,
            "content": "<corral_spare_end>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        },
    ]
    (padded / "tokenizer.json").write_text(json.dumps(source))
    build_tiny_model(weights, padded)
    models: dict[str, Path] = {}
    for path in templates:
        folder = out / path.stem
        build_family_tokenizer(folder, Path(tokenizer_dir), path.read_text())
        for name in ("config.json", "model.safetensors"):
            shutil.copy(weights / name, folder / name)
        models[path.stem] = folder
    return models
