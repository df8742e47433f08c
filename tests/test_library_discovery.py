"""The library finds models in fixture folders laid out like each app's store (Corral's cache,
the Hugging Face cache, LM Studio, Ollama), describes them from their headers, loads them,
and deletes nothing but Corral's own copies."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from engine.errors import LibraryError, ModelLoadError
from engine.library.discovery import LibraryRoots, ollama_blob, scan_library
from engine.library.paths import delete_own_copy
from engine.memory.budget import GiB, MemoryBudget
from tests.library_support import make_stores

BIG = MemoryBudget(False, 64 * GiB)


@pytest.fixture()
def stores(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    return make_stores(tmp_path, tiny_model_dir, monkeypatch)


def _by_name(models):
    return {m.name: m for m in models}


def test_every_store_is_listed_with_what_people_need_to_choose(stores: dict) -> None:
    started = time.thread_time()  # CPU time: reading headers, not files, whatever the load
    found = scan_library(LibraryRoots.default(stores["corral"]), BIG)
    elapsed = time.thread_time() - started
    by = _by_name(found)
    assert set(by) == {
        "TinyLlama-Q6_K (imported)",
        "mlx-community/Tiny-4bit",  # Corral's download and the HF cache's copy
        "org/half",
        "bartowski/TinyLlama-GGUF/TinyLlama-Q6_K.gguf",
        "TinyLlama-Q4_K",
        "mlx-community/Tiny-mlx",
        "mamba",
        "tinyllama:q4k",
        "ghost:latest",
    }
    assert [m.source for m in found] == sorted(
        (m.source for m in found), key=("corral", "huggingface", "lmstudio", "ollama").index
    )
    lm = by["TinyLlama-Q4_K"]
    assert (lm.source, lm.kind, lm.architecture, lm.quantization) == (
        "lmstudio",
        "gguf",
        "llama",
        "Q4_K",
    )
    import gguf

    reader = gguf.GGUFReader(str(stores["q4k"]))  # gguf's own count of the values
    assert lm.parameters == sum(int(t.n_elements) for t in reader.tensors)
    assert lm.context_length == 2048
    assert lm.size_bytes == stores["q4k"].stat().st_size and lm.can_run and not lm.deletable
    assert lm.repo_id == "lmstudio-community/TinyLlama-GGUF"
    ollama = by["tinyllama:q4k"]
    assert ollama.spec == "ollama:tinyllama:q4k" and ollama.can_run
    ghost = by["ghost:latest"]
    assert not ghost.can_run and "missing" in (ghost.reason or "")
    assert "architecture not supported yet: mamba" in (by["mamba"].reason or "")
    mlx = [m for m in found if m.name == "mlx-community/Tiny-4bit"]
    assert {m.source for m in mlx} == {"corral", "huggingface"}
    for m in mlx:
        assert (m.kind, m.architecture, m.quantization) == ("mlx", "llama", "float32")
        assert m.parameters and m.parameters > 6_000_000 and m.context_length == 8192
    imported = by["TinyLlama-Q6_K (imported)"]
    assert imported.deletable and imported.quantization == "8-bit"
    assert imported.origin and imported.origin.endswith("TinyLlama-Q6_K.gguf")
    assert not by["org/half"].can_run and "resume" in (by["org/half"].reason or "")
    assert not any("mmproj" in m.path for m in found)
    assert elapsed < 10


def test_an_import_is_known_by_where_its_gguf_is_now(stores: dict) -> None:
    """The app (or its venv) moved since the import: the same file loaded from its new place
    reuses the import, and the library names that place as the import's origin, so the
    built-in model's import is still shown as the built-in model."""
    from engine.library.load import ensure_gguf_imported

    old = stores["q6k"]
    moved = old.parent.parent / "moved" / old.name
    moved.parent.mkdir()
    old.rename(moved)
    first = _by_name(scan_library(LibraryRoots.default(stores["corral"]), BIG))
    before = first["TinyLlama-Q6_K (imported)"]
    assert before.origin == str(old)  # nothing newer known: the recorded place
    folder = ensure_gguf_imported(moved)
    assert str(folder) == before.path  # the same import, not a second one
    again = _by_name(scan_library(LibraryRoots.default(stores["corral"]), BIG))
    assert again["TinyLlama-Q6_K (imported)"].origin == str(moved.resolve())
    # a marker whose list of places is damaged or hostile: the place recorded at import
    marker_path = Path(folder) / "corral_source.json"
    marker = json.loads(marker_path.read_text())
    for seen in (5, [{"path": "x" * 100_000}, {"path": "a\x00b"}, "not a place"]):
        marker_path.write_text(json.dumps({**marker, "seen": seen}))
        damaged = _by_name(scan_library(LibraryRoots.default(stores["corral"]), BIG))
        assert damaged["TinyLlama-Q6_K (imported)"].origin == marker["gguf"], seen


def test_memory_budget_decides_can_run(stores: dict) -> None:
    tiny = MemoryBudget(False, 2 * GiB)  # nothing left after the OS's headroom
    found = scan_library(LibraryRoots.default(stores["corral"]), tiny)
    runnable = [m for m in found if m.reason and m.reason.startswith("needs about")]
    assert runnable and all("this machine's budget is" in (m.reason or "") for m in runnable)


def test_ollama_model_loads_by_name_and_a_missing_blob_is_clear(stores: dict) -> None:
    from engine.library.load import load_model

    loaded = load_model("ollama:tinyllama:q4k")
    assert loaded.info.name == "tinyllama:q4k"
    with pytest.raises(ModelLoadError, match="ghost:latest.*missing") as err:
        load_model("ollama:ghost")
    assert "ollama pull ghost:latest" in str(err.value)
    blob = ollama_blob("tinyllama:q4k", stores["ollama"])
    assert blob.read_bytes()[:4] == b"GGUF"


def _tree(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.lstat().st_size for p in sorted(folder.rglob("*"))}


def test_only_corrals_own_copies_are_deleted(stores: dict) -> None:
    corral, home = stores["corral"], stores["home"]
    before = _tree(home)
    found = scan_library(LibraryRoots.default(corral), BIG)
    for m in found:
        if m.deletable:
            continue
        with pytest.raises(LibraryError, match="not one of Corral's own copies"):
            delete_own_copy(m.path, corral)
    # a link inside Corral's folder to another app's model: the link goes, the model stays
    link = corral / "models" / "linked"
    link.symlink_to(stores["lms"])
    delete_own_copy(link, corral)
    assert not link.exists() and stores["lms"].is_dir()
    # names that climb out of Corral's folders
    for sneaky in (corral / "models" / ".." / "..", corral / "models" / "..", corral):
        with pytest.raises(LibraryError):
            delete_own_copy(sneaky, corral)
    for m in found:
        if m.deletable:
            assert delete_own_copy(m.path, corral) > 0
            assert not Path(m.path).exists()
    assert _tree(home) == before  # no other app's file changed
    assert (
        list((corral / "models").iterdir()) == [] and list((corral / "downloads").iterdir()) == []
    )


def test_cli_lists_the_library(stores: dict, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {m["source"] for m in listed} == {"corral", "huggingface", "lmstudio", "ollama"}
    assert main(["models"]) == 0
    table = capsys.readouterr().out
    assert "tinyllama:q4k" in table and "no: blob" in table
    assert main(["models", "--delete", str(stores["lms"] / "TinyLlama-Q4_K.gguf")]) == 2
    assert "not one of Corral's own copies" in capsys.readouterr().err
    assert (stores["lms"] / "TinyLlama-Q4_K.gguf").exists()


# The shape of Qwen3-Coder's template: XML parameters inside <tool_call>, thinking in <think>.
_QWEN_XML = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if tools %}<tool_call>\n<function=NAME>\n<parameter=k>\nv\n</parameter>\n</function>"
    "\n</tool_call>{%- endif %}{{ '<think>\n' }}</think>"
)


def test_each_model_says_which_dialect_it_speaks(
    stores: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.cli import main
    from engine.tools.dialect import template_dialect

    qwen = stores["home"] / ".lmstudio" / "models" / "mlx-community" / "Tiny-mlx"
    (qwen / "chat_template.jinja").write_text(_QWEN_XML)
    by = _by_name(scan_library(LibraryRoots.default(stores["corral"]), BIG, template_dialect))
    coder = by["mlx-community/Tiny-mlx"]
    assert (coder.tool_syntax, coder.thinking_syntax) == ("qwen_xml", "think")
    # SmolLM2's and the GGUF fixtures' ChatML has no tool syntax: said plainly, not guessed.
    smol, gguf = by["mlx-community/Tiny-4bit"], by["TinyLlama-Q4_K"]
    for model in (smol, gguf):
        assert model.tool_syntax is not None
        assert model.tool_syntax.startswith("described in the system prompt")
        assert model.thinking_syntax == "none"
    assert by["ghost:latest"].tool_syntax is None  # no file, no template, nothing claimed
    # Without a reader the scan claims nothing either.
    plain = _by_name(scan_library(LibraryRoots.default(stores["corral"]), BIG))
    assert plain["mlx-community/Tiny-mlx"].tool_syntax is None

    assert main(["models", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert listed["mlx-community/Tiny-mlx"]["tool_syntax"] == "qwen_xml"
    assert "chat_template" not in listed["mlx-community/Tiny-mlx"]  # the list stays short
    assert main(["models"]) == 0
    table = capsys.readouterr().out
    assert "Tool calls" in table and "qwen_xml" in table and "in prompt" in table


def test_a_huge_or_binary_chat_template_is_not_read(stores: dict) -> None:
    from engine.library.discovery import folder_chat_template
    from engine.tools.dialect import template_dialect

    folder = stores["home"] / ".lmstudio" / "models" / "mlx-community" / "Tiny-mlx"
    template = folder / "chat_template.jinja"
    template.write_bytes(b"<function=" + b"x" * (2 << 20) + b"<parameter=")  # 2 MiB
    assert folder_chat_template(folder) == ""  # past the limit: not read
    template.write_bytes(b"\xff\xfe<function=\x00<parameter=")  # not UTF-8
    assert folder_chat_template(folder) == ""
    found = _by_name(scan_library(LibraryRoots.default(stores["corral"]), BIG, template_dialect))
    model = found["mlx-community/Tiny-mlx"]
    assert model.can_run and model.tool_syntax is None  # listed, no dialect claimed
