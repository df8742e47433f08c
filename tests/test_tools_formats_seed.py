"""Seed-OSS writes Qwen3-Coder's XML parameters inside its own `<seed:tool_call>` (values
without the blank lines Qwen puts around them). The tiny model here carries
ByteDance-Seed/Seed-OSS-36B-Instruct's template (`tests/fixtures/chat-templates/seed-oss.jinja`,
as llama.cpp's `models/templates` keeps it): Corral must serve it Seed's syntax, not Qwen's.
(A call decoded in it and rendered back: the families tests, which take every fixture.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from tools_support import grammar_accepts

from benchmarks.families import ASK, WEATHER
from engine.tools import prepare_tool_request
from engine.tools.dialect import template_dialect
from engine.tools.formats import QwenXmlFormat, choose_format

SEED_TEMPLATE = (
    Path(__file__).resolve().parent / "fixtures" / "chat-templates" / "seed-oss.jinja"
).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def seed_model(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path) -> Path:
    from benchmarks.tiny_family_model import build_family_models

    source = Path(__file__).resolve().parent / "fixtures" / "chat-templates" / "seed-oss.jinja"
    out = tmp_path_factory.mktemp("seed-model")
    return build_family_models(out, default_model_dir, [source])["seed-oss"]


def test_seed_is_served_its_own_syntax_not_qwens(seed_model: Path) -> None:
    from mlx_lm.tokenizer_utils import load

    tok = load(seed_model)
    fmt = choose_format(tok)
    assert (fmt.name, fmt.native) == ("seed_xml", True)
    assert template_dialect(SEED_TEMPLATE) == ("seed_xml", "seed")
    arguments = {"city": "Paris", "days": 2, "unit": "c"}
    one = fmt.calls_as_text([("get_weather", arguments)])
    assert one == (
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
        "<parameter=days>2</parameter>\n<parameter=unit>c</parameter>\n</function>\n"
        "</seed:tool_call>"
    )
    required = prepare_tool_request(tok, ASK, [WEATHER], "required")
    hf = tok._tokenizer
    assert grammar_accepts(hf, required.constraint.source, one)
    qwen = QwenXmlFormat(tok, native=True).calls_as_text([("get_weather", arguments)])
    assert not grammar_accepts(hf, required.constraint.source, qwen)
    too_long = one.replace("Paris", "Parisparisparis")  # past maxLength 12
    assert not grammar_accepts(hf, required.constraint.source, too_long)
    content, calls = required.parse(one)
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", arguments)]
