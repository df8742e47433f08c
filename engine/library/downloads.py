"""Download a model from Hugging Face by repo id: a size and memory check first, then byte
progress with speed, cancel at any moment, and resume from where a cancelled or failed
download stopped.

The Hub is spoken to only through `huggingface_hub` (pinned): `HfApi.model_info` lists the
files and their sizes, `hf_hub_url` and `file_download.http_get` fetch each one (`http_get`
resumes with an HTTP Range from the bytes already on disk). Corral keeps each file's partial
bytes in `.partial/` inside the model's own folder under `downloads/`, so a later download
of the same repo picks them up; a finished repo gets a `corral_download.json` marker.
The endpoint is `HF_ENDPOINT` (or the `endpoint` argument), read at call time.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import LibraryError
from engine.files import is_inside
from engine.library.paths import own_folder
from engine.memory.budget import MemoryBudget, gb

MARKER = "corral_download.json"
PARTIAL = ".partial"
# What an MLX model folder needs; other files (PyTorch .bin, GGUF, images) are left out.
ALLOW_PATTERNS = (
    "*.safetensors",
    "*.json",
    "*.jinja",
    "*.model",
    "*.tiktoken",
    "*.txt",
    "*.py",
)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_SAFE_FILE = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


class DownloadCancelled(LibraryError):
    """The user stopped the download; what arrived is kept for a resume."""


@dataclass(frozen=True)
class DownloadProgress:
    """Bytes so far (this run and resumed ones), total, and speed over the last seconds."""

    repo_id: str
    done_bytes: int
    total_bytes: int
    bytes_per_s: float
    file: str

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 0.0

    def describe(self) -> str:
        speed = f"{self.bytes_per_s / 1e6:.1f} MB/s" if self.bytes_per_s else "starting"
        done, total = gb(self.done_bytes), gb(self.total_bytes)
        return f"Downloading {self.repo_id}: {done} of {total}, {speed}"


@dataclass(frozen=True)
class DownloadPlan:
    """What a download will fetch and whether it fits, decided before any byte moves."""

    repo_id: str
    revision: str
    endpoint: str | None
    folder: Path
    files: dict[str, int]  # name -> size
    missing_bytes: int  # still to fetch (partial files count as fetched)
    free_disk_bytes: int
    memory_bytes: int
    budget: MemoryBudget
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())

    @property
    def fits_disk(self) -> bool:
        return self.missing_bytes < self.free_disk_bytes

    @property
    def fits_memory(self) -> bool:
        return self.budget.fits(self.memory_bytes)

    def describe(self) -> str:
        """'needs ~X GB of disk and Y GB of memory; this Mac's budget is Z'."""
        text = (
            f"{self.repo_id} needs ~{gb(self.missing_bytes)} of disk "
            f"({gb(self.free_disk_bytes)} free) and {gb(self.memory_bytes)} of memory; "
            f"{self.budget.describe()}"
        )
        if not self.fits_disk:
            text += ". Not enough disk space."
        elif not self.fits_memory:
            text += ". It would not fit in memory."
        return text


def check_repo_id(repo_id: str) -> str:
    """`repo_id` if it looks like "org/name" (which also keeps it a safe folder name)."""
    repo_id = repo_id.strip()
    if not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise LibraryError(f"{repo_id!r} is not a Hugging Face repo id (like org/name)")
    return repo_id


def download_folder(corral_root: Path, repo_id: str) -> Path:
    """Where `repo_id` is downloaded: downloads/ORG--NAME in Corral's cache."""
    folder = own_folder(corral_root, "downloads") / check_repo_id(repo_id).replace("/", "--")
    if not is_inside(folder, corral_root):
        raise LibraryError(f"{folder}: outside Corral's cache {corral_root}")
    return folder


def completed_download(corral_root: Path, repo_id: str) -> Path | None:
    """The folder of a finished download of `repo_id`, if there is one."""
    folder = download_folder(corral_root, repo_id)
    return folder if (folder / MARKER).is_file() else None


def _endpoint(endpoint: str | None) -> str | None:
    return endpoint or os.environ.get("HF_ENDPOINT") or None


def _hub_error(exc: Exception, repo_id: str, endpoint: str | None) -> LibraryError:
    from huggingface_hub.errors import (
        GatedRepoError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = endpoint or "huggingface.co"
    if isinstance(exc, GatedRepoError):
        return LibraryError(f"{repo_id} is gated on {where}: accept its terms and log in first")
    if isinstance(exc, RepositoryNotFoundError):
        return LibraryError(
            f"no model named {repo_id} on {where} (check the spelling; private repos need a token)"
        )
    if isinstance(exc, RevisionNotFoundError):
        return LibraryError(f"{repo_id}: no such revision on {where}")
    return LibraryError(f"could not reach {where} for {repo_id}: {exc}")


def plan_download(
    repo_id: str,
    corral_root: Path,
    budget: MemoryBudget,
    *,
    endpoint: str | None = None,
    revision: str | None = None,
    token: str | None = None,
) -> DownloadPlan:
    """Ask the Hub what `repo_id` holds and check it against the disk and memory budget.

    Args:
        repo_id: "org/name".
        corral_root: Corral's cache folder; the model goes into its downloads/ folder.
        budget: this machine's memory budget.
        endpoint: the Hub's address (default: HF_ENDPOINT, else huggingface.co).
        revision: a branch, tag or commit (default: main).
        token: a Hugging Face token for private or gated repos.
    """
    from huggingface_hub import HfApi

    # (exported lazily by huggingface_hub.utils, which mypy cannot see)
    from huggingface_hub.utils import (  # type: ignore[attr-defined]
        build_hf_headers,
        filter_repo_objects,
    )

    repo_id = check_repo_id(repo_id)
    endpoint = _endpoint(endpoint)
    try:
        info = HfApi(endpoint=endpoint, token=token).model_info(
            repo_id, revision=revision, files_metadata=True
        )
    except Exception as exc:  # huggingface_hub and httpx errors: all become one message
        raise _hub_error(exc, repo_id, endpoint) from exc
    siblings = {s.rfilename: int(s.size or 0) for s in info.siblings or []}
    files = {
        name: siblings[name]
        for name in filter_repo_objects(list(siblings), allow_patterns=list(ALLOW_PATTERNS))
        if _SAFE_FILE.match(name) and ".." not in name.split("/")
    }
    weights = sum(size for name, size in files.items() if name.endswith(".safetensors"))
    if "config.json" not in files or not weights:
        ggufs = [n for n in siblings if n.endswith(".gguf")]
        hint = f" (it holds {len(ggufs)} GGUF files: download one and import it)" if ggufs else ""
        raise LibraryError(f"{repo_id} is not an MLX or safetensors model repo{hint}")
    folder = download_folder(corral_root, repo_id)
    have = 0
    for name, size in files.items():
        if (folder / name).is_file():
            have += size
        elif (part := folder / PARTIAL / name).is_file():
            have += min(part.stat().st_size, size)
    probe = folder if folder.exists() else own_folder(corral_root, "downloads")
    while not probe.exists():
        probe = probe.parent
    return DownloadPlan(
        repo_id=repo_id,
        revision=str(info.sha or revision or "main"),
        endpoint=endpoint,
        folder=folder,
        files=files,
        missing_bytes=sum(files.values()) - have,
        free_disk_bytes=shutil.disk_usage(probe).free,
        memory_bytes=weights,  # the weights load as stored (mlx-lm maps them)
        budget=budget,
        headers=build_hf_headers(token=token),
    )


class _Progress:
    """Counts bytes from every file of a download; raises DownloadCancelled when asked."""

    def __init__(
        self,
        plan: DownloadPlan,
        done: int,
        on_progress: Callable[[DownloadProgress], None],
        cancel: threading.Event,
    ) -> None:
        self.plan = plan
        self.done = done
        self.file = ""
        self.on_progress = on_progress
        self.cancel = cancel
        self.samples: deque[tuple[float, int]] = deque(maxlen=64)
        self.last_report = 0.0
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        if self.cancel.is_set():
            raise DownloadCancelled(
                f"download of {self.plan.repo_id} cancelled; {gb(self.done)} of "
                f"{gb(self.plan.total_bytes)} kept, download it again to resume"
            )
        with self.lock:
            self.done += n
            now = time.monotonic()
            self.samples.append((now, self.done))
            if now - self.last_report < 0.1 and self.done < self.plan.total_bytes:
                return
            self.last_report = now
        self.report()

    def speed(self) -> float:
        recent = [(t, d) for t, d in self.samples if t > time.monotonic() - 3]
        if len(recent) < 2 or recent[-1][0] <= recent[0][0]:
            return 0.0
        return (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])

    def report(self) -> None:
        self.on_progress(
            DownloadProgress(
                self.plan.repo_id, self.done, self.plan.total_bytes, self.speed(), self.file
            )
        )

    def tqdm_class(self) -> type:
        """A stand-in for tqdm that huggingface_hub's http_get updates per chunk."""
        progress = self

        class Bar:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                pass

            def __enter__(self) -> Bar:
                return self

            def __exit__(self, *exc: object) -> None:
                pass

            def update(self, n: float | None = 1) -> None:
                progress.add(int(n or 0))

            def close(self) -> None:
                pass

        return Bar


def _fetch(plan: DownloadPlan, name: str, size: int, progress: _Progress) -> None:
    """Download one file into .partial/ (resuming what is there), then move it in place."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.file_download import http_get

    final = plan.folder / name
    part = plan.folder / PARTIAL / name
    for path in (final, part):
        if not is_inside(path, plan.folder):
            raise LibraryError(f"{plan.repo_id}: file name {name!r} leaves the model folder")
    part.parent.mkdir(parents=True, exist_ok=True)
    resume = part.stat().st_size if part.exists() else 0
    if resume > size:  # not this file's bytes (the repo changed): start again
        part.unlink()
        progress.done -= resume
        resume = 0
    url = hf_hub_url(plan.repo_id, name, revision=plan.revision, endpoint=plan.endpoint)
    progress.file = name
    try:
        with open(part, "ab") as f:
            http_get(
                url,
                f,
                resume_size=resume,
                headers=dict(plan.headers),
                expected_size=size,
                displayed_filename=name,
                tqdm_class=progress.tqdm_class(),
            )
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise LibraryError(
                f"the disk is full: {name} of {plan.repo_id} could not be written to "
                f"{plan.folder} ({gb(part.stat().st_size)} of it kept for a resume)"
            ) from exc
        raise
    if part.stat().st_size != size:
        raise LibraryError(
            f"{plan.repo_id}: {name} arrived with {part.stat().st_size} bytes, expected {size}"
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(part, final)


def download(
    plan: DownloadPlan,
    on_progress: Callable[[DownloadProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """Fetch what `plan` lists into its folder and return the folder.

    Args:
        plan: from `plan_download` (check `fits_disk` and `fits_memory` first).
        on_progress: called with a DownloadProgress several times a second.
        cancel: set it (from any thread) to stop; raises DownloadCancelled, keeping the
            bytes that arrived so the next download of the same repo resumes.
    """
    cancel = cancel or threading.Event()
    plan.folder.mkdir(parents=True, exist_ok=True)
    have = sum(size for name, size in plan.files.items() if (plan.folder / name).is_file())
    have += sum(
        min((plan.folder / PARTIAL / name).stat().st_size, size)
        for name, size in plan.files.items()
        if not (plan.folder / name).is_file() and (plan.folder / PARTIAL / name).is_file()
    )
    progress = _Progress(plan, have, on_progress or (lambda p: None), cancel)
    progress.report()
    for name, size in sorted(plan.files.items(), key=lambda kv: kv[1]):
        if (plan.folder / name).is_file() and (plan.folder / name).stat().st_size == size:
            continue
        try:
            _fetch(plan, name, size, progress)
        except LibraryError:
            raise
        except Exception as exc:  # network and Hub errors, with the repo named
            raise _hub_error(exc, plan.repo_id, plan.endpoint) from exc
    shutil.rmtree(plan.folder / PARTIAL, ignore_errors=True)
    marker = {"repo_id": plan.repo_id, "revision": plan.revision, "files": plan.files}
    (plan.folder / MARKER).write_text(json.dumps(marker, indent=2))
    progress.report()
    return plan.folder
