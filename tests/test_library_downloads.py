"""Downloads by repo id through huggingface_hub, pointed (HF_ENDPOINT) at a loopback server
serving a small repo made in the test: the size check, byte progress, cancel, resume, and
clear errors for a repo that does not exist, a GGUF-only repo and a full disk."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from engine.errors import LibraryError
from engine.library.downloads import (
    MARKER,
    PARTIAL,
    DownloadCancelled,
    DownloadProgress,
    download,
    plan_download,
)
from engine.memory.budget import GiB, MemoryBudget
from tests.hf_hub_server import HubServer

REPO = "corral-test/tiny-llama"
BUDGET = MemoryBudget(False, 64 * GiB)


@pytest.fixture()
def hub(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    gguf_only = tmp_path / "gguf-only"
    gguf_only.mkdir()
    (gguf_only / "model-Q4_K_M.gguf").write_bytes(b"GGUF" + bytes(100))
    with HubServer({REPO: tiny_model_dir, "corral-test/gguf-only": gguf_only}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def test_download_reports_progress_and_the_model_loads(
    hub: HubServer, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "corral"
    plan = plan_download(REPO, root, BUDGET)
    sizes = {p.name: p.stat().st_size for p in tiny_model_dir.iterdir()}
    assert plan.files == sizes and plan.missing_bytes == sum(sizes.values())
    text = plan.describe()
    assert text.startswith(f"{REPO} needs ~") and "of memory; this machine's budget is" in text
    assert plan.fits_disk and plan.fits_memory

    seen: list[DownloadProgress] = []
    folder = download(plan, seen.append)
    assert folder == root / "downloads" / "corral-test--tiny-llama"
    done = [p.done_bytes for p in seen]
    assert done == sorted(done) and done[-1] == plan.total_bytes == seen[-1].total_bytes
    assert len(seen) > 2 and any(p.bytes_per_s > 0 for p in seen)
    for name in sizes:
        assert (folder / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    assert (folder / MARKER).exists() and not (folder / PARTIAL).exists()

    # Typed again, the repo id loads from Corral's copy: no network needed.
    from engine.library.load import load_model, resolve_model

    monkeypatch.setenv("CORRAL_CACHE_DIR", str(root))
    hub.httpd.shutdown()
    assert resolve_model(REPO) == folder
    loaded = load_model(REPO)
    assert loaded.info.name == REPO


def test_cancel_keeps_the_bytes_and_the_next_download_resumes(
    hub: HubServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "corral"
    plan = plan_download(REPO, root, BUDGET)
    weights = plan.files["model.safetensors"]
    hub.delay = 0.003  # ~20 MB/s, so the test can stop it midway
    cancel = threading.Event()
    errors: list[BaseException] = []

    def progress(p: DownloadProgress) -> None:
        if p.file == "model.safetensors" and p.fraction > 0.4:
            cancel.set()

    def run() -> None:
        try:
            download(plan, progress, cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(60)
    assert len(errors) == 1 and isinstance(errors[0], DownloadCancelled)
    assert "download it again to resume" in str(errors[0])
    part = plan.folder / PARTIAL / "model.safetensors"
    kept = part.stat().st_size
    assert 0 < kept < weights
    assert not (plan.folder / MARKER).exists()

    hub.delay = 0.0
    start = len(hub.requests)
    again = plan_download(REPO, root, BUDGET)
    assert again.missing_bytes == weights - kept  # the check knows what is already here
    folder = download(again)
    gets = [r for r in hub.requests[start:] if r["path"].endswith("model.safetensors")]
    assert [r["range"] for r in gets] == [f"bytes={kept}-"]
    assert gets[0]["sent"] == weights - kept  # nothing fetched twice
    for name in plan.files:
        assert (folder / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name


def test_repo_that_does_not_exist(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(LibraryError, match="no model named nobody/nothing on http://127"):
        plan_download("nobody/nothing", tmp_path, BUDGET)
    assert not (tmp_path / "downloads").exists()


@pytest.mark.parametrize("bad", ["../etc", "org/name/extra", "org/..", "", "org /name"])
def test_bad_repo_ids_are_refused_before_any_request(
    hub: HubServer, tmp_path: Path, bad: str
) -> None:
    with pytest.raises(LibraryError, match="not a Hugging Face repo id"):
        plan_download(bad, tmp_path, BUDGET)
    assert hub.requests == []


def test_gguf_only_repo_says_what_it_holds(hub: HubServer, tmp_path: Path) -> None:
    with pytest.raises(LibraryError, match="holds 1 GGUF files"):
        plan_download("corral-test/gguf-only", tmp_path, BUDGET)


def test_unreachable_hub(tmp_path: Path) -> None:
    with pytest.raises(LibraryError, match="could not reach http://127.0.0.1:9"):
        plan_download(REPO, tmp_path, BUDGET, endpoint="http://127.0.0.1:9")


def test_memory_check_before_starting(hub: HubServer, tmp_path: Path) -> None:
    small = MemoryBudget(False, 2 * GiB)  # all of it kept free for the OS
    plan = plan_download(REPO, tmp_path, small)
    assert not plan.fits_memory
    assert plan.describe().endswith("It would not fit in memory.")


@pytest.fixture()
def tiny_disk(tmp_path: Path):
    """A 2 MB file system (tmpfs), where mounting is allowed (root in a container)."""
    mount = tmp_path / "tiny-disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_full_disk(hub: HubServer, tiny_disk: Path) -> None:
    plan = plan_download(REPO, tiny_disk, BUDGET)
    assert not plan.fits_disk
    assert plan.describe().endswith("Not enough disk space.")
    with pytest.raises(LibraryError, match="the disk is full") as err:
        download(plan)  # started anyway: a clear error, not a traceback
    message = str(err.value)
    assert "corral-test/tiny-llama" in message and "kept for a resume" in message
    assert str(tiny_disk) in message
