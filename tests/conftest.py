"""Shared fixtures: the real default model, a tiny random model with the same tokenizer,
and engines loaded with each. Model folders are built, and each model loaded, once per
test session: tests that need the default model use `default_engine` (its engine thread
runs anything that touches the model: `default_engine.run(fn)`)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Engines the app builds keep prompts on disk: in a folder of this test run's own, so no
# run reads what an earlier one left (nor fills the user's cache folder).
if "CORRAL_PROMPT_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["CORRAL_PROMPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="corral-prompt-cache-")
# Extraction jobs, Batch API batches and the log (`python -m engine` run by a test writes
# one) likewise: never the user's data or log folder.
for _name, _prefix in (
    ("CORRAL_EXTRACT_DIR", "corral-extract-"),
    ("CORRAL_BATCH_DIR", "corral-batches-"),
    ("CORRAL_LOG_DIR", "corral-logs-"),
):
    if _name not in os.environ:
        import tempfile

        os.environ[_name] = tempfile.mkdtemp(prefix=_prefix)

import pytest  # noqa: E402

import engine  # noqa: E402,F401  (preloads OpenBLAS before MLX)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    from engine.library.load import ensure_default_model

    return ensure_default_model()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path) -> Path:
    from benchmarks.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), default_model_dir)


@pytest.fixture(scope="session")
def embedding_model_dirs(
    tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path
) -> dict[str, Path]:
    """A tiny random embedding model of each covered family (by family name) and a
    cross-encoder reranker ("reranker"), from mlx-embeddings' own classes with real
    tokenizers (benchmarks/tiny_embedding_models.py), built once per session."""
    from benchmarks.tiny_embedding_models import EMBEDDING_FAMILIES, build_embedding_model

    root = tmp_path_factory.mktemp("embedding-models")
    folders = {
        name: build_embedding_model(name, root / name, default_model_dir)
        for name in EMBEDDING_FAMILIES
    }
    folders["reranker"] = build_embedding_model(
        "modernbert", root / "reranker", default_model_dir, rerank=True
    )
    return folders


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir: Path):
    """(model, tokenizer) of the tiny model, loaded on the test thread, for tests that drive
    it directly (the prompt cache, tokenizer checks)."""
    import mlx_lm

    return mlx_lm.load(str(tiny_model_dir))[:2]


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir: Path):
    """The tiny model on an engine of the session. Whether its rows draft is decided by their
    drafts' acceptance alone, not by how long this machine's wide passes took (which a busy
    machine changes): tests that count drafts see the same on any machine."""
    from engine.engine import Engine

    eng = Engine(learn_pass_cost=False)
    eng.load_model(str(tiny_model_dir)).result()
    yield eng
    eng.close()


SHORT_CONTEXT = 256  # tokens the `short_engine` model reads


@pytest.fixture(scope="module")
def short_engine(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path):
    """The tiny model declaring a context of SHORT_CONTEXT tokens, on its own engine (one
    per test module, so no module sees another's prompt cache)."""
    from benchmarks.tiny_model import build_tiny_model
    from engine.engine import Engine

    folder = build_tiny_model(
        tmp_path_factory.mktemp("short"), default_model_dir, context=SHORT_CONTEXT
    )
    eng = Engine()
    eng.load_model(str(folder)).result()
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def default_engine(default_model_dir: Path):
    from engine.engine import Engine

    eng = Engine()
    eng.load_model("default").result()
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def default_gguf() -> Path:
    from engine.library.load import default_gguf_path

    return default_gguf_path()


def require_bench_model(missing: str | None) -> None:
    """Skip the calling test when a bench model's package is not installed (`missing` says
    why), or fail it under CORRAL_REQUIRE_BENCH_MODELS=1 (set by .ci/run)."""
    from benchmarks.bench_models import REQUIRE_ENV

    if missing is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{missing}, and {REQUIRE_ENV}=1 requires it", pytrace=False)
    pytest.skip(missing)


@pytest.fixture(scope="session")
def tiny262k_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stress model with Gemma 3's 262,144-token vocabulary (benchmarks/bench_models.py:
    tiny random weights, the real tokenizer). Needs Gemma's package (the bench extra),
    imported once into the cache; without it the test skips, naming the package."""
    from benchmarks.bench_models import build_stress_model, gemma_missing

    require_bench_model(gemma_missing())
    return build_stress_model(tmp_path_factory.mktemp("tiny262k"), "262k")


@pytest.fixture(scope="session")
def tiny262k_engine(tiny262k_model_dir: Path):
    """The 262k stress model on an engine of the session (drafting decided by acceptance)."""
    from engine.engine import Engine

    eng = Engine(learn_pass_cost=False)
    eng.load_model(str(tiny262k_model_dir)).result()
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def thinking_model_dir(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path) -> Path:
    """The tiny model with a Qwen3-like tokenizer and chat template: `<think>`/`</think>`
    as single tokens, thinking switched by `enable_thinking`."""
    from benchmarks.tiny_thinking_model import build_tiny_thinking_model

    return build_tiny_thinking_model(tmp_path_factory.mktemp("thinking-model"), default_model_dir)


@pytest.fixture(scope="session")
def thinking_engine(thinking_model_dir: Path):
    from engine.engine import Engine

    eng = Engine()
    eng.load_model(str(thinking_model_dir)).result()
    yield eng
    eng.close()


# The tiny vision model (LLaVA) and an engine for it: tests/vision_support.py.
from tests.vision_support import (  # noqa: E402,F401
    vision_engine,
    vision_family_dir,
    vision_model_dir,
)
