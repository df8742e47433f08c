"""How each model family of the dataset's chat templates is served (the `families` section).

Over every template in `../shared/datasets/chat-templates` (CORRAL_DATASETS overrides
`../shared/datasets`), each on a tiny random model that carries the template and its
markers (benchmarks/tiny_family_model.py):

- `families_native_rate`: templates with tool support served in their own call syntax
  (not the fallback); goal 1.0;
- `families_valid_rate`: of those, required calls decoded by the engine that parse, with
  arguments valid against the tool's schema (`jsonschema`); goal 1.0;
- `families_roundtrip_rate`: of those, calls whose reply re-appears unchanged in the prompt
  the template renders for the next turn (the prefix cache reuses it): its tokens, or,
  where the random model split free text its own way, the text's own tokens with every
  marker written as the same token (`rendered_back`); goal 0.95;
- `families_thinking_rate`: templates that think (SOURCES.tsv's note names a thinking
  syntax) whose thinking the engine separated from the answer; goal 1.0;
- `families_render_rate`: templates that render a conversation with tools (a call, its
  result, a reply, a new question); goal 1.0.

Each figure comes with the names of the templates that missed it (`*_misses`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from engine.engine import Engine
from engine.types import ChatMessage, ChatRequest, SamplingSettings, ToolDefinition

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
WEATHER: ToolDefinition = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "unit": {"type": "string", "enum": ["c", "f"]},
            },
            "required": ["city", "unit"],
        },
    },
}
ASK: list[ChatMessage] = [{"role": "user", "content": "Weather in Paris?"}]


def templates_folder() -> Path:
    root = Path(os.environ.get("CORRAL_DATASETS") or DATASETS)
    return root / "chat-templates"


def thinking_templates(folder: Path) -> set[str]:
    """Templates whose SOURCES.tsv note names a thinking syntax."""
    sources = folder / "SOURCES.tsv"
    if not sources.is_file():
        return set()
    with sources.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    out = set()
    for row in rows:
        note = (row.get("note") or "").lower()
        if (
            "thinking" in note or "reasoning:" in note or "[think]" in note
        ) and "no reasoning" not in note:
            out.add(Path(row["file"]).stem)
    return out


def call_history(calls: list[Any]) -> list[dict[str, Any]]:
    """The question, an assistant turn making `calls` (ToolCalls) and a result for each."""
    return [
        *(dict(m) for m in ASK),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ],
        },
        *({"role": "tool", "tool_call_id": c.id, "content": "22 C"} for c in calls),
    ]


def _contains(tokens: list[int], run: list[int]) -> bool:
    n = len(run)
    return n > 0 and any(tokens[i : i + n] == run for i in range(len(tokens) - n + 1))


def rendered_back(tok: Any, reply: list[int], prompt: list[int]) -> bool:
    """Whether the reply's tokens re-appear in `prompt` (the next turn's, rendered by the
    template from the parsed calls): token for token, or, where the random model split its
    free text its own way, as the text's own tokenization with every marker the model
    wrote as the same added token (a marker spelled in byte pieces never counts)."""
    if _contains(prompt, reply):
        return True
    hf = tok._tokenizer
    added = {int(i) for i in (getattr(hf, "added_tokens_decoder", None) or {})}
    canonical = hf.encode(hf.decode(reply, skip_special_tokens=False), add_special_tokens=False)
    markers = [t for t in reply if t in added]
    return _contains(prompt, canonical) and markers == [t for t in canonical if t in added]


def family_figures(eng: Engine, name: str, folder: Path, thinks: bool) -> dict[str, bool | None]:
    """What one template's model does: native, valid, roundtrip, thinking, render (None
    where a figure does not apply)."""
    import jsonschema
    from mlx_lm.tokenizer_utils import load

    from engine.tools import prepare_tool_request
    from engine.tools.formats import choose_format, has_tool_support

    tok = load(folder)
    from engine.prompt.tokenizer import ModelTokenizer

    template = ModelTokenizer.of(tok).chat_template or ""
    supported = has_tool_support(template)
    fmt = choose_format(tok)
    out: dict[str, bool | None] = {"native": fmt.native if supported else None}
    out["valid"] = out["roundtrip"] = None
    eng.load_model(str(folder)).result()
    sampling = SamplingSettings(max_tokens=160, seed=7, think=False)
    request = ChatRequest(
        messages=ASK,
        sampling=sampling,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
    )
    result = eng.chat(request)
    calls = result.tool_calls
    schema = WEATHER["function"]["parameters"]
    if supported:
        try:
            for call in calls:
                jsonschema.validate(call.arguments, schema)
            out["valid"] = bool(calls) and result.error is None
        except jsonschema.ValidationError:
            out["valid"] = False
    reply = list(result.reply_token_ids)
    try:
        history = call_history(calls) if calls else ASK
        again = prepare_tool_request(tok, history, [WEATHER], "auto")
        if supported and calls:
            out["roundtrip"] = rendered_back(tok, reply, again.prompt_tokens)
        follow = [
            *history,
            {"role": "assistant", "content": "It is 22 C."},
            {"role": "user", "content": "Thanks"},
        ]
        prepare_tool_request(tok, follow, [WEATHER], "auto")
        out["render"] = True
    except Exception:  # noqa: BLE001  (a template that cannot render is the figure)
        out["render"] = False
        if supported and calls:
            out["roundtrip"] = False
    out["thinking"] = None
    if thinks:
        thought = eng.chat(
            ChatRequest(
                messages=ASK,
                sampling=SamplingSettings(max_tokens=24, seed=7, think=True, max_thinking_tokens=4),
            )
        )
        out["thinking"] = thought.reasoning is not None
    return out


def _rate(rows: dict[str, dict[str, bool | None]], key: str) -> tuple[float, list[str]]:
    counted = {n: r[key] for n, r in rows.items() if r[key] is not None}
    misses = sorted(n for n, ok in counted.items() if not ok)
    return (round(1 - len(misses) / len(counted), 4) if counted else 0.0), misses


def run_families_bench(engine: Engine | None, args: argparse.Namespace) -> dict[str, Any]:
    """Build a tiny model per template and measure each on an engine of its own."""
    from benchmarks.tiny_family_model import build_family_models
    from engine.library.load import ensure_default_model

    folder = templates_folder()
    paths = sorted(folder.glob("*.jinja"))
    if not paths:
        raise FileNotFoundError(f"no chat templates in {folder}")
    thinks = thinking_templates(folder)
    rows: dict[str, dict[str, bool | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = build_family_models(tmp, ensure_default_model(), paths)
        eng = Engine(speculative=False)
        try:
            for name, model in models.items():
                rows[name] = family_figures(eng, name, model, name in thinks)
        finally:
            eng.close()
    figures: dict[str, Any] = {"families_templates": len(rows)}
    for key in ("native", "valid", "roundtrip", "thinking", "render"):
        rate, misses = _rate(rows, key)
        figures[f"families_{key}_rate"] = rate
        figures[f"families_{key}_misses"] = misses
    return figures
