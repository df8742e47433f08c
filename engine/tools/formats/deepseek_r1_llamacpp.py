"""DeepSeek R1 as llama.cpp distributes its template: R1's calls, rendered only for a call
turn whose text is null.

Checked against llama.cpp's own `models/templates/llama-cpp-deepseek-r1.jinja` (written
for R1 and its distills where the official template renders no tools): the tools as JSON
(`tools | map(attribute='function') | tojson(indent=2)`, a generator Corral's `tojson`
writes) with an example call, a call turn written only when its `content` is null (fitting
gives an empty text as None), R1's syntax
`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{…}\\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>`,
results in `<｜tool▁outputs▁begin｜>`, and a generation prompt that opens `<think>`.
"""

from __future__ import annotations

from engine.tools.formats.deepseek import DeepSeekR1Format


class DeepSeekR1LlamaCppFormat(DeepSeekR1Format):
    """DeepSeek R1 (llama.cpp's template): `<｜tool▁calls▁begin｜>
    <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{…}\\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>`,
    a call turn's text null."""

    name = "deepseek_r1_llamacpp"
    checked_against = ("deepseek-r1-llamacpp.jinja",)

    @classmethod
    def detect(cls, template: str) -> bool:
        return DeepSeekR1Format.detect(template) and "['content'] is none" in template
