"""A tiny random model that thinks the way Qwen3 does: `<think>`/`</think>` as added tokens
and a Qwen3-like chat template with `enable_thinking`, for the reasoning tests and the
`reasoning` benchmark.

No Qwen tokenizer is on disk (and tests never download), so the tokenizer is the default
model's with the two tags added as single tokens, and the template follows Qwen3's
rules: thinking on unless `enable_thinking` is false (then the generation prompt holds an
empty, closed thinking block), and earlier assistant turns lose their thinking.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.tiny_model import build_tiny_model

THINK_START, THINK_END = "<think>", "</think>"

# Qwen3's template, cut to what the tests need: ChatML, reasoning stripped from history,
# and the closed empty block when thinking is switched off.
QWEN3_LIKE_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- set content = message['content'] or '' %}"
    "{%- if '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)

# DeepSeek-R1's way: the generation prompt itself opens the thinking block.
R1_LIKE_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
)


def build_thinking_tokenizer(
    out_dir: str | Path, tokenizer_dir: str | Path, *, template: str = QWEN3_LIKE_TEMPLATE
) -> Path:
    """Write the tokenizer of `tokenizer_dir` with `<think>` and `</think>` added as single
    tokens and `template` as its chat template into `out_dir`."""
    from transformers import AutoTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    tok.add_tokens([THINK_START, THINK_END], special_tokens=False)
    tok.chat_template = template
    tok.save_pretrained(str(out))
    return out


def build_tiny_thinking_model(
    out_dir: str | Path,
    tokenizer_dir: str | Path,
    *,
    template: str = QWEN3_LIKE_TEMPLATE,
    seed: int = 0,
) -> Path:
    """A tiny random llama MLX folder at `out_dir` whose tokenizer (the default model's,
    from `tokenizer_dir`) thinks with `<think>…</think>` under `template`."""
    out = Path(out_dir)
    tok_dir = build_thinking_tokenizer(out / "tokenizer-src", tokenizer_dir, template=template)
    build_tiny_model(out, tok_dir, seed=seed)
    for name in ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        src = tok_dir / name
        if src.exists():
            (out / name).write_bytes(src.read_bytes())
    return out
