"""`python -m app --self-test`: the installation checks itself, headless, and says why when
it cannot (the bundle's own run is in test_packaging.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema

from app.self_test import SELF_TEST_SCHEMA


def test_self_test_checks_this_installation_without_a_display(default_model_dir):
    """`python -m app --self-test` (what a packaged app runs to check itself): the default
    model writes schema-valid JSON, no Qt GUI module loads, the report says so."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "QT_QPA_PLATFORM")}
    run = subprocess.run(
        [sys.executable, "-m", "app", "--self-test"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["ok"] and report["model"] == "SmolLM2-135M-Instruct"
    assert report["qt_modules"] == [] and not report["frozen"]
    jsonschema.validate(json.loads(report["text"]), SELF_TEST_SCHEMA)
    broken = subprocess.run(
        [sys.executable, "-m", "app", "--self-test", "--model", "/nowhere/model"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert broken.returncode == 1
    failed = json.loads(broken.stdout.strip().splitlines()[-1])
    assert failed["ok"] is False and "/nowhere/model" in failed["error"]
