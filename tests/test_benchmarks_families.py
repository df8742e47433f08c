"""The `families` bench section's figures for single templates: a family served in its own
syntax counts as native, valid and rendering; a template without tools counts in none of
the tool figures; SOURCES.tsv's notes name the thinking templates."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_datasets import dataset

from benchmarks.families import _rate, family_figures, thinking_templates


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path) -> dict[str, Path]:
    from benchmarks.tiny_family_model import build_family_models

    folder = dataset("chat-templates")
    paths = [folder / "qwen3-coder.jinja", folder / "gemma-2.jinja"]
    return build_family_models(tmp_path_factory.mktemp("families"), default_model_dir, paths)


def test_figures_of_a_tool_family_and_of_a_template_without_tools(models) -> None:
    from engine.engine import Engine

    eng = Engine(speculative=False)
    try:
        coder = family_figures(eng, "qwen3-coder", models["qwen3-coder"], thinks=False)
        plain = family_figures(eng, "gemma-2", models["gemma-2"], thinks=False)
    finally:
        eng.close()
    assert coder["native"] is True and coder["valid"] is True and coder["render"] is True
    assert coder["roundtrip"] is not None and coder["thinking"] is None
    assert plain["native"] is None and plain["valid"] is None and plain["roundtrip"] is None
    assert plain["render"] is True  # the fallback renders even without a system role
    rate, misses = _rate({"a": coder, "b": {**coder, "valid": False}}, "valid")
    assert (rate, misses) == (0.5, ["b"])


def test_thinking_templates_are_read_from_the_sources_notes() -> None:
    thinks = thinking_templates(dataset("chat-templates"))
    assert {"qwen3", "deepseek-r1-distill-qwen", "gpt-oss", "magistral-small-2509"} <= thinks
    assert not {"qwen2.5", "llama-3.2", "gemma-2", "mistral-nemo"} & thinks
