"""gpt-oss (Harmony): the analysis channel, then the final channel (or a call in the
commentary channel); `reasoning_effort` low, medium or high goes to the template."""

from engine.prompt.reasoning.base import ThinkingSyntax

HARMONY = ThinkingSyntax(
    "harmony",
    "<|channel|>",
    "<|end|>",
    needs=("<|channel|>", "analysis"),
    kind="channels",
    opener="<|channel|>analysis<|message|>",
    closer="<|end|><|start|>assistant",
    prefix="<|channel|>final<|message|>",
    switches=(),
    effort="reasoning_effort",
)
