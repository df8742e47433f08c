"""The shared datasets beside the repository (`../shared/datasets`), read in place.

A clone without them still passes its tests: each test that reads them skips, naming the
missing folder, and every behaviour such a test checks also has a self-contained test on
schemas written in the suite. CI has the datasets and must use them: with
CORRAL_REQUIRE_DATASETS=1 (set by .ci/run) a missing folder fails the test instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# CORRAL_DATASETS points elsewhere (a checkout whose parent has no shared/, a worktree).
DATASETS = Path(
    os.environ.get("CORRAL_DATASETS")
    or Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
)
REQUIRE = "CORRAL_REQUIRE_DATASETS"


def dataset(*parts: str) -> Path:
    """The dataset folder `parts` under ../shared/datasets; skips the calling test (or fails
    it, under CORRAL_REQUIRE_DATASETS=1) when the folder is missing or empty."""
    path = DATASETS.joinpath(*parts)
    if path.is_dir() and any(path.iterdir()):
        return path
    reason = f"dataset folder {path} is missing"
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{reason} and {REQUIRE}=1 requires it", pytrace=False)
    pytest.skip(reason)
