"""`python -m engine` writes the app's log (engine/logs.py, engine/cli.py): each command and
its failure recorded where the window's diagnostics read them, and a log folder that cannot
be written costs the log, never the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _engine(args: list[str], log_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORRAL_LOG_DIR": str(log_dir)}
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_each_command_and_its_failure_is_in_the_log(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    done = _engine(["import-gguf", str(missing)], tmp_path / "logs")
    assert done.returncode != 0
    logged = (tmp_path / "logs" / "corral.log").read_text()
    assert "python -m engine import-gguf" in logged
    assert "ERROR" in logged and "nowhere.gguf" in logged


def test_an_unwritable_log_folder_costs_only_the_log(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    done = _engine(["--log-level", "debug", "models", "--json"], blocked / "logs")
    assert done.returncode == 0, done.stderr
    assert done.stdout.lstrip().startswith("[")
    assert "warning: not writing the log" in done.stderr
