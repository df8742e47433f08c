"""`<think>…</think>`: Qwen3, QwQ, DeepSeek R1/V3.1/V3.2, GLM-4.5/4.6, MiniMax M2, Kimi K2
Thinking, Nemotron, SmolLM3 (a blank line before the answer); and `<thinking>` tags."""

from engine.prompt.reasoning.base import ThinkingSyntax

THINK = ThinkingSyntax(
    "think",
    "<think>",
    "</think>",
    needs=("think>",),  # `<think>` or `</think>`: some write only one
    separator="\n\n",
    switches=("enable_thinking", "thinking"),
)
THINKING = ThinkingSyntax(
    "thinking", "<thinking>", "</thinking>", needs=("thinking>",), separator="\n\n"
)
