"""Kimi K3: `<|open|>think<|sep|>…<|close|>think<|sep|>` then `<|open|>response<|sep|>`; the
generation prompt opens the think block when `thinking`, `thinking_effort` low…max."""

from engine.prompt.reasoning.base import ThinkingSyntax

KIMI_K3 = ThinkingSyntax(
    "kimi_k3",
    "<|open|>",
    "<|close|>",
    needs=("<|open|>", "thinking_effort"),
    opener="<|open|>think<|sep|>",
    closer="<|close|>think<|sep|>",
    prefix="<|open|>response<|sep|>",
    switches=("thinking",),
    effort="thinking_effort",
)
