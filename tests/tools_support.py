"""Helpers for the tool tests: fixture tokenizers with real chat templates and Glaive tool sets."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import engine  # noqa: F401  (preloads OpenBLAS before mlx)

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = Path(__file__).resolve().parent / "fixtures" / "templates"
GLAIVE = ("jsonschemabench", "Glaiveai2K")  # under ../shared/datasets: see datasets.py

# Extra tokens each fixture tokenizer adds to the SmolLM2 vocabulary, as the real model
# families have them: (content, special). Qwen's <tool_call> is an ordinary added token;
# Llama's header and end tokens and Mistral's [TOOL_CALLS] are control tokens.
FIXTURES: dict[str, dict[str, Any]] = {
    "chatml": {
        "template": "chatml_smollm2.jinja",
        "added": [],
        "eos": "<|im_end|>",
        "bos": "<|im_start|>",
    },
    "qwen2_5": {
        "template": "qwen2_5.jinja",
        "added": [("<tool_call>", False), ("</tool_call>", False)],
        "eos": "<|im_end|>",
        "bos": None,
    },
    "llama3_2": {
        "template": "llama3_2.jinja",
        "added": [
            ("<|begin_of_text|>", True),
            ("<|start_header_id|>", True),
            ("<|end_header_id|>", True),
            ("<|eot_id|>", True),
            ("<|eom_id|>", True),
            ("<|python_tag|>", True),
        ],
        "eos": "<|eot_id|>",
        "bos": "<|begin_of_text|>",
    },
    "mistral_v3": {
        "template": "mistral_v3.jinja",
        "added": [
            ("<s>", True),
            ("</s>", True),
            ("[INST]", True),
            ("[/INST]", True),
            ("[TOOL_CALLS]", True),
            ("[AVAILABLE_TOOLS]", True),
            ("[/AVAILABLE_TOOLS]", True),
            ("[TOOL_RESULTS]", True),
            ("[/TOOL_RESULTS]", True),
        ],
        "eos": "</s>",
        "bos": "<s>",
    },
}


def default_model_dir() -> Path:
    from engine.library.load import ensure_default_model

    return ensure_default_model()


def build_fixture_tokenizer(name: str, out: Path) -> Path:
    """A tokenizer folder: SmolLM2's vocabulary plus the family's added tokens and its
    chat template (ChatML is SmolLM2's own, without tool support)."""
    spec = FIXTURES[name]
    src = default_model_dir()
    out.mkdir(parents=True, exist_ok=True)
    tok = json.loads((src / "tokenizer.json").read_text())
    config = json.loads((src / "tokenizer_config.json").read_text())
    next_id = max(len(tok["model"]["vocab"]), 1 + max(t["id"] for t in tok["added_tokens"]))
    for content, special in spec["added"]:
        tok["added_tokens"].append(
            {
                "id": next_id,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": special,
            }
        )
        next_id += 1
    if spec["template"]:
        config["chat_template"] = (TEMPLATES / spec["template"]).read_text()
    config["eos_token"] = spec["eos"]
    config["bos_token"] = spec["bos"]
    config["pad_token"] = spec["eos"]
    (out / "tokenizer.json").write_text(json.dumps(tok))
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    shutil.copy(src / "special_tokens_map.json", out / "special_tokens_map.json")
    special_map = {"eos_token": spec["eos"], "bos_token": spec["bos"], "pad_token": spec["eos"]}
    (out / "special_tokens_map.json").write_text(json.dumps(special_map))
    return out


def load_fixture_tokenizer(name: str, tmp: Path) -> Any:
    from mlx_lm.tokenizer_utils import load

    return load(build_fixture_tokenizer(name, tmp / name))


@lru_cache(maxsize=8)
def ll_tokenizer(hf_tokenizer: Any) -> Any:
    import llguidance.hf

    return llguidance.hf.from_tokenizer(hf_tokenizer)


def grammar_accepts(hf_tokenizer: Any, grammar: str, text: str) -> bool:
    """Whether the grammar accepts `text` as a whole reply, fed as the tokens the tokenizer
    gives it (special tokens written in the text become their single ids)."""
    from llguidance import LLMatcher

    lt = ll_tokenizer(hf_tokenizer)
    matcher = LLMatcher(lt, grammar, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    tokens = hf_tokenizer.encode(text, add_special_tokens=False)
    return matcher.consume_tokens(tokens) and matcher.is_accepting()


@dataclass
class GlaiveCase:
    tools: list[dict[str, Any]]
    target: str  # the tool the request asks for
    request: str  # a user message stating the arguments' values


def _glaive_entries(glaive: Path) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(function name, parameter schema, a valid example of arguments) per file, sorted."""
    entries = []
    for path in sorted(glaive.glob("*.json")):
        data = json.loads(path.read_text())
        valid = [t["data"] for t in data.get("tests", []) if t.get("valid")]
        if valid and isinstance(valid[0], dict) and valid[0]:
            entries.append((path.stem.rsplit("_", 1)[0], data["schema"], valid[0]))
    return entries


def glaive_cases(glaive: Path, count: int, max_example_chars: int = 100) -> list[GlaiveCase]:
    """`count` tool sets from Glaiveai2K, chosen deterministically: files in the order of
    the MD5 of their function name (a fixed shuffle, so the verbs vary), one per name, whose
    example arguments are short enough for a small token budget.

    Each set is [a fixed distractor tool, the target tool]: the distractor is the next
    function in that order, so every prompt shares its tools prefix (and its cache)."""
    entries = [e for e in _glaive_entries(glaive) if len(json.dumps(e[2])) <= max_example_chars]
    entries.sort(key=lambda e: hashlib.md5(e[0].encode()).hexdigest())
    chosen: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    names: set[str] = set()
    for entry in entries:
        if entry[0] not in names and len(chosen) <= count:
            names.add(entry[0])
            chosen.append(entry)

    def tool(entry: tuple[str, dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
        name, schema, _ = entry
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": name.replace("_", " ").capitalize(),
                "parameters": schema,
            },
        }

    distractor = tool(chosen[-1])
    cases = []
    for name, schema, example in chosen[:count]:
        details = ", ".join(f"{key} {json.dumps(value)}" for key, value in example.items())
        request = f"{name.replace('_', ' ').capitalize()} with {details}."
        cases.append(GlaiveCase([distractor, tool((name, schema, example))], name, request))
    return cases
