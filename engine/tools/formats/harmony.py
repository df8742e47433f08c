"""gpt-oss's Harmony: a call is a message to the function on the commentary channel.

The generation prompt ends with `<|start|>assistant`; a call continues it with
` to=functions.NAME<|channel|>commentary json<|message|>{…}<|call|>`, an answer with
`<|channel|>final<|message|>…`. Thinking (the analysis channel) may come first, ending with
`<|end|><|start|>assistant`; engine.prompt.reasoning separates it. One call per message.
"""

from __future__ import annotations

import json
import re

from engine.tools.formats.base import TEXT, RawCall, Schemas, ToolFormat, json_arguments

_CALL = re.compile(
    r"(?:<\|start\|>assistant)?\s*to=functions\.(?P<name>[^\s<]+)\s*<\|channel\|>commentary[^<]*"
    r"<\|message\|>(?P<args>.*?)(?:<\|call\|>|$)",
    re.DOTALL,
)
_FINAL = re.compile(
    r"<\|channel\|>final<\|message\|>(?P<text>.*?)(?:<\|end\|>|<\|return\|>|$)", re.DOTALL
)
_ANALYSIS = re.compile(r"<\|channel\|>analysis<\|message\|>.*?(?:<\|end\|>|$)", re.DOTALL)


class HarmonyFormat(ToolFormat):
    """gpt-oss Harmony: `<|start|>assistant to=functions.NAME<|channel|>commentary
    json<|message|>{…}<|call|>`."""

    name = "harmony"
    checked_against = ("gpt-oss.jinja",)
    reply_end = "<|call|>"
    call_start = " to=functions."
    marker_text = "to=functions."
    parallel = False
    json_objects = False
    # Any markup opens the region: what is content is known once the message is parsed.
    stream_openers = (("<|", True), (" to=functions.", True))

    @classmethod
    def detect(cls, template: str) -> bool:
        return "<|channel|>" in template and " to=" in template and "functions" in template

    def call_lark(self, tool_name: str, args_rule: str) -> str:
        head = self.lark_text(f" to=functions.{tool_name}<|channel|>commentary json<|message|>")
        return f"{head} {args_rule} {self.lark_text('<|call|>')}"

    def reply_lark(self, required: bool, parallel: bool) -> str:
        # Thinking (the analysis channel) is engine.prompt.reasoning's; after it the answer
        # is a new message, `<|start|>assistant` again.
        restart = f"({self.lark_text('<|start|>assistant')})?"
        if required:
            return f"start: {restart} fn\n"
        final = f"{self.lark_text('<|channel|>final<|message|>')} ANSWER"
        return f"start: {restart} (fn | {final})\nANSWER: {TEXT}\n"

    def parse(self, text: str, schemas: Schemas | None = None) -> tuple[str, list[RawCall]]:
        body = _ANALYSIS.sub("", text)
        calls: list[RawCall] = []
        first = _CALL.search(body)
        for match in _CALL.finditer(body):
            arguments = json_arguments(match.group("args").strip())
            if (
                arguments is None
                or not match.group(0).endswith("<|call|>")
                and not body.rstrip().endswith("}")
            ):
                return self._content(text), []
            calls.append((match.group("name"), arguments))
        if calls and first is not None:  # what the message said before its call
            return self._content(body[: first.start()]), calls
        return self._content(text), calls

    @staticmethod
    def _content(text: str) -> str:
        final = _FINAL.search(text)
        if final is not None:
            return final.group("text").strip()
        return _ANALYSIS.sub("", text).replace("<|start|>assistant", "").strip()

    def text_reply(self, text: str) -> str:
        return f"<|channel|>final<|message|>{text}"

    def calls_as_text(self, calls: list[RawCall]) -> str:
        return "".join(
            f"<|start|>assistant to=functions.{n}<|channel|>commentary json<|message|>"
            f"{json.dumps(a, ensure_ascii=False)}<|call|>"
            for n, a in calls
        )
