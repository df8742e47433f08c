"""The library window and repo downloads in the app: scans never block the window, rows say
what people need to choose, Load and Delete (Corral's copies only) work, the model picker
lists the models on this computer, and a repo id typed in its download window is checked,
downloaded with progress, cancelled, resumed and loaded."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit, QMessageBox

from app.views.common.format import format_bytes
from engine.memory.budget import GiB, MemoryBudget
from tests.app_helpers import close_window, make_window
from tests.hf_hub_server import HubServer
from tests.library_support import make_stores

BIG = MemoryBudget(False, 64 * GiB)


@pytest.fixture()
def stores(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    return make_stores(tmp_path, tiny_model_dir, monkeypatch)


def _row(window, name: str):
    for i in range(window.tree.topLevelItemCount()):
        item = window.tree.topLevelItem(i)
        if item.text(0) == name:
            return item
    raise AssertionError(f"no row {name!r}")


def test_library_window_lists_loads_and_deletes_only_corrals_copies(
    qtbot, stores: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.jobs.library_job import LibraryJob
    from app.views.library.window import LibraryWindow

    job = LibraryJob(lambda: BIG)
    window = LibraryWindow(job, lambda: None)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(job.scanned, timeout=30_000):
        started = time.perf_counter()
        job.refresh()
        assert time.perf_counter() - started < 0.1  # the scan runs on a worker thread
        assert window.status.text() == "Looking for models…"
    assert window.tree.topLevelItemCount() == len(job.models) == 10
    assert window.status.text() == "10 models, 7 can run here"

    lm = _row(window, "TinyLlama-Q4_K")
    size = format_bytes(stores["q4k"].stat().st_size)
    assert [lm.text(c) for c in range(1, 8)] == [
        "llama",
        "693K",
        "Q4_K",
        size,
        "2K",
        "LM Studio",
        "Yes",
    ]
    lm.setSelected(True)
    assert window.load_button.isEnabled() and not window.delete_button.isEnabled()
    assert "Imported into Corral's cache on first use" in window.detail.text()
    # Its ChatML template has no tool syntax of its own: the window says, in plain words,
    # that Corral describes the tools to it; the technical names are in the tooltip.
    assert window.abilities.text() == (
        "Tool calls: supported (Corral describes the tools to this model)"
        " · Thinks before answering: no"
    )
    assert "described in the system prompt (hermes calls)" in window.abilities.toolTip()
    assert "Thinking syntax: none" in window.abilities.toolTip()
    from dataclasses import replace

    from app.views.library.window import ability_words

    native = replace(lm.data(0, Qt.ItemDataRole.UserRole), tool_syntax="hermes")
    said, technical = ability_words(replace(native, thinking_syntax="qwen3"))
    assert said.startswith("Tool calls: supported (in the model's own format)")
    assert said.endswith("Thinks before answering: yes") and "hermes" in technical
    with qtbot.waitSignal(window.loadRequested) as load:
        window.load_button.click()
    assert load.args == [lm.data(0, Qt.ItemDataRole.UserRole).spec]

    window.tree.clearSelection()
    ghost = _row(window, "ghost:latest")
    ghost.setSelected(True)
    assert not window.load_button.isEnabled() and "missing" in window.detail.text()
    # a model Corral cannot read a chat template from says why there is no answer
    assert window.abilities.text() == (
        "Tool calls: not known until it loads (its files carry no chat template to tell)"
    )
    assert ghost.text(7).startswith("No: blob sha256-")

    window.tree.clearSelection()
    imported = _row(window, "TinyLlama-Q6_K (imported)")
    imported.setSelected(True)
    assert window.delete_button.isEnabled()
    path = Path(imported.data(0, Qt.ItemDataRole.UserRole).path)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    with (
        qtbot.waitSignal(job.deleted, timeout=30_000),
        qtbot.waitSignal(job.scanned, timeout=30_000),
    ):
        window.delete_button.click()
    assert (
        not path.exists()
        and stores["q4k"].exists()
        and (stores["lms"] / "TinyLlama-Q4_K.gguf").exists()
    )
    assert window.tree.topLevelItemCount() == 9

    window.filter.setText("ollama")
    visible = [
        window.tree.topLevelItem(i).text(0)
        for i in range(window.tree.topLevelItemCount())
        if not window.tree.topLevelItem(i).isHidden()
    ]
    assert sorted(visible) == ["ghost:latest", "tinyllama:q4k"]


def test_the_picker_lists_models_on_this_computer_and_loads_one(
    qtbot, tmp_path: Path, stores: dict
) -> None:
    """The picker's menu shows the library's models that run here, with their sizes, from
    the scan made on a worker thread; choosing one loads it (a GGUF is imported on first
    use), names it on the button and puts it first, ticked, its import not listed twice."""
    from engine.engine import Engine

    eng = Engine()
    window = make_window(qtbot, tmp_path / "data", eng)
    try:
        bar = window.model_bar
        qtbot.waitUntil(lambda: len(bar.model_actions()) == 6, timeout=30_000)
        labels = [label for label, _spec in bar.model_actions()]
        size = format_bytes(stores["q4k"].stat().st_size)
        assert labels[0] == "SmolLM2-135M-Instruct"  # built in, not imported here yet
        assert f"TinyLlama-Q4_K · {size}" in labels
        assert labels.count("mlx-community/Tiny-4bit · 28.9\xa0MB") == 1  # Corral's and HF's
        assert not any(label.startswith(("mamba", "ghost", "org/half")) for label in labels)
        assert not any(a.isChecked() for a in bar.menu.actions())
        assert bar.picker.text() == "No model"
        (q4k,) = [a for a in bar.menu.actions() if a.text().startswith("TinyLlama-Q4_K ·")]
        assert q4k.toolTip().startswith("LM Studio, llama, Q4_K\n")

        with qtbot.waitSignal(window.bridge.modelLoaded, timeout=60_000):
            q4k.trigger()
        qtbot.waitUntil(lambda: bar.picker.text() == f"TinyLlama-Q4_K · {size}", timeout=30_000)
        qtbot.waitUntil(lambda: not window.library.job.busy, timeout=30_000)
        assert any(m.name == "TinyLlama-Q4_K (imported)" for m in window.library.job.models)
        first = bar.menu.actions()[1]  # under the "On this computer" heading
        assert first.text() == bar.picker.text() and first.isChecked()
        assert not any("(imported)" in a.text() and "Q4_K" in a.text() for a in bar.menu.actions())
        with qtbot.assertNotEmitted(window.bridge.loadStarted):
            first.trigger()  # the loaded one: not loaded again, still ticked
        assert first.isChecked()
        assert window.store.get_setting("recent_models")[0]["spec"] == str(
            stores["lms"] / "TinyLlama-Q4_K.gguf"
        )
    finally:
        close_window(window)
        eng.close()


def test_download_window_checks_downloads_with_progress_cancel_and_resume(
    qtbot, tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The picker's "Download a model…" opens a window with the repo field (completed from
    the library): the size and memory check is said, then progress with speed, shown as a
    chip in the toolbar while the window is closed; Cancel keeps the bytes, the next try
    resumes, and the model loads and heads the picker's list."""
    from engine.engine import Engine

    monkeypatch.setenv("CORRAL_CACHE_DIR", str(tmp_path / "corral"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo = "corral-test/tiny-llama"
    eng = Engine()
    with HubServer({repo: tiny_model_dir}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        window = make_window(qtbot, tmp_path / "data", eng)
        try:
            bar = window.model_bar
            assert window.toolbar.findChild(QLineEdit) is None  # no permanent repo field
            (download,) = [a for a in bar.menu.actions() if a.text() == "Download a model…"]
            download.trigger()
            dialog = window.library.download_dialog
            assert dialog.isVisible() and dialog.focusWidget() is dialog.repo
            qtbot.keyClicks(dialog.repo, "not a repo id")
            qtbot.keyClick(dialog.repo, Qt.Key.Key_Return)
            assert "looks like org/name" in dialog.message.text()
            assert not dialog.start.isEnabled() and window.library.download_job is None

            hub.delay = 0.003
            dialog.repo.clear()
            qtbot.keyClicks(dialog.repo, repo)
            dialog.start.click()
            qtbot.waitUntil(dialog.progress.isVisible, timeout=30_000)
            assert dialog.message.text().startswith(f"{repo} needs ~")  # checked first
            assert "of memory" in dialog.message.text()
            assert dialog.cancel.isVisible() and not dialog.start.isEnabled()
            qtbot.waitUntil(lambda: dialog.progress.value() >= 30, timeout=30_000)  # midway
            speed = r"MB of [\d.]+\xa0MB · [\d.]+\xa0[KM]B/s$"  # bytes so far and speed
            assert re.search(speed, dialog.detail.text()), dialog.detail.text()
            dialog.close_button.click()  # the download goes on, as a chip in the toolbar
            assert not dialog.isVisible() and window.library.download_job.running
            chip = bar.download_chip
            assert chip.isVisible() and chip.text().endswith("%")
            assert chip.toolTip().startswith(f"Downloading {repo}: ")
            assert any(a.text().startswith(f"Downloading {repo} (") for a in bar.menu.actions())
            chip.click()
            assert dialog.isVisible()
            dialog.cancel.click()
            qtbot.waitUntil(lambda: "resume" in dialog.message.text(), timeout=30_000)
            assert not dialog.cancel.isVisible() and not chip.isVisible()
            assert download.text() == "Download a model…" and dialog.start.isEnabled()

            hub.delay = 0.0
            with qtbot.waitSignal(window.bridge.modelLoaded, timeout=60_000) as loaded:
                qtbot.keyClick(dialog.repo, Qt.Key.Key_Return)
            assert loaded.args[0].name == repo
            ranges = [r["range"] for r in hub.requests if r["path"].endswith("model.safetensors")]
            assert ranges[-1] is not None  # the second download resumed
            qtbot.waitUntil(lambda: repo in dialog.completions.stringList(), timeout=30_000)
            qtbot.waitUntil(lambda: bar.picker.text().startswith(f"{repo} · "), timeout=30_000)
            first = bar.menu.actions()[1]  # after the "On this computer" heading
            assert first.text() == bar.picker.text() and first.isChecked()
        finally:
            close_window(window)
            eng.close()


def test_a_download_past_the_memory_budget_waits_for_the_users_word(
    qtbot, tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine whose memory the model would not fit, the download window says so
    before any byte moves and downloads only after "Download anyway"."""
    from engine.engine import Engine

    monkeypatch.setenv("CORRAL_CACHE_DIR", str(tmp_path / "corral"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo = "corral-test/tiny-llama"
    eng = Engine()
    with HubServer({repo: tiny_model_dir}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        window = make_window(qtbot, tmp_path / "data", eng)
        small = MemoryBudget(False, 8 * 1024 * 1024)  # a machine with 8 MB to spare
        monkeypatch.setattr(window.library, "memory_budget", lambda: small)
        try:
            window.library.show_download()
            dialog = window.library.download_dialog
            dialog.repo.setText(repo)
            dialog.start.click()
            qtbot.waitUntil(dialog.anyway.isVisible, timeout=30_000)
            assert dialog.message.text().endswith("It would not fit in memory.")
            assert dialog.message.property("kind") == "warning"
            assert not any(r["path"].endswith(".safetensors") for r in hub.requests)
            assert not window.model_bar.download_chip.isVisible()
            with qtbot.waitSignal(window.bridge.modelLoaded, timeout=60_000) as loaded:
                dialog.anyway.click()
            assert loaded.args[0].name == repo
            assert dialog.message.text() == f"{repo} is downloaded: loading it."
            assert not dialog.anyway.isVisible() and not dialog.progress.isVisible()
        finally:
            close_window(window)
            eng.close()


def test_a_refresh_asked_during_a_scan_scans_again_after_it(
    qtbot, stores: dict, tiny_model_dir: Path
) -> None:
    """A model opened while the first scan still runs shows up: that scan started before
    the model was recent, so the job scans once more when it ends (the picker missed the
    model it had just loaded when the load beat the first scan)."""
    from app.jobs.library_job import LibraryJob

    job = LibraryJob(lambda: BIG)
    scans: list[object] = []
    job.scanned.connect(scans.append)
    job.refresh()
    job.recent_paths = [str(tiny_model_dir)]
    job.refresh()  # while the first scan runs: not doubled, but not lost either
    job.refresh()
    qtbot.waitUntil(lambda: len(scans) == 2 and not job.busy, timeout=30_000)
    assert job.present == {str(tiny_model_dir)}
    qtbot.wait(200)
    assert len(scans) == 2  # two asks during one scan make one more scan, not two
