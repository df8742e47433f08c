"""Packaging: the app's Info.plist, icons, bundle audit, launcher, and a real bundle build.

The slow test builds the bundle for this OS with PyInstaller in a temporary folder (a
one-folder bundle on Linux, Corral.app on macOS), audits it, runs `Corral --self-test` (the
bundled model generating schema-constrained JSON, no Qt) and starts the GUI offscreen.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import plistlib
import shutil
import struct
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest

from app import self_test

ROOT = Path(__file__).resolve().parents[1]
PACKAGING = ROOT / "packaging"


def _load(name: str) -> ModuleType:
    # By path: `packaging` is also the name of a PyPI package pytest itself imports.
    spec = importlib.util.spec_from_file_location(f"corral_pkg_{name}", PACKAGING / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bundle_info = _load("bundle_info")
icons = _load("icons")
audit = _load("audit")
launcher = _load("launcher")


# ---- Info.plist ----


def test_info_plist_version_and_identity_come_from_the_project():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    info = bundle_info.info_plist()
    assert info["CFBundleShortVersionString"] == pyproject["project"]["version"]
    assert info["CFBundleIdentifier"] == "app.corral.Corral"
    assert info["CFBundleName"] == "Corral"
    assert info["NSHighResolutionCapable"] is True
    assert tuple(map(int, info["LSMinimumSystemVersion"].split("."))) >= (13, 0)
    # Every value must be a plist type, or PyInstaller writes a broken Info.plist.
    assert plistlib.loads(plistlib.dumps(info)) == info


@pytest.mark.parametrize("ext", ["json", "lark", "gbnf", "regex"])
def test_each_grammar_extension_is_declared_and_openable(ext):
    info = bundle_info.info_plist()
    handled = {uti for doc in info["CFBundleDocumentTypes"] for uti in doc["LSItemContentTypes"]}
    declared = {
        e: decl["UTTypeIdentifier"]
        for decl in info["UTExportedTypeDeclarations"]
        for e in decl["UTTypeTagSpecification"]["public.filename-extension"]
    }
    if ext == "json":  # the system's type; Corral must not claim to own it
        assert "public.json" in handled and "json" not in declared
        docs = info["CFBundleDocumentTypes"]
        doc = next(d for d in docs if "public.json" in d["LSItemContentTypes"])
        assert doc["LSHandlerRank"] == "Alternate"
    else:
        assert declared[ext] in handled
        decls = info["UTExportedTypeDeclarations"]
        decl = next(d for d in decls if d["UTTypeIdentifier"] == declared[ext])
        assert "public.plain-text" in decl["UTTypeConformsTo"]


def test_minimum_macos_follows_the_newest_wheel_tag():
    assert bundle_info.min_macos_for([]) == "13.0"
    assert bundle_info.min_macos_for(["cp311-cp311-manylinux_2_35_x86_64"]) == "13.0"
    assert (
        bundle_info.min_macos_for(
            ["cp311-cp311-macosx_15_0_arm64", "py3-none-macosx_11_0_universal2"]
        )
        == "15.0"
    )
    assert bundle_info.min_macos_for(["cp312-abi3-macosx_14_2_arm64"]) == "14.2"
    assert bundle_info.info_plist(min_macos="14.0")["LSMinimumSystemVersion"] == "14.0"


# ---- icons ----


def test_icon_source_is_a_square_1024_png_with_alpha():
    data = icons.SOURCE.read_bytes()
    assert icons.png_size(data) == (1024, 1024)
    assert data[25] == 6  # IHDR colour type 6: RGBA, so the rounded corners are transparent


def test_icns_holds_every_iconset_size(tmp_path):
    out = icons.make_icns(tmp_path / "Corral.icns")
    data = out.read_bytes()
    assert data[:4] == b"icns" and struct.unpack(">I", data[4:8])[0] == len(data)
    chunks, pos = {}, 8
    while pos < len(data):
        kind, length = data[pos : pos + 4], struct.unpack(">I", data[pos + 4 : pos + 8])[0]
        chunks[kind] = data[pos + 8 : pos + length]
        pos += length
    assert pos == len(data)
    for name, px in icons.ICONSET.items():
        assert icons.png_size(chunks[icons.ICNS_TYPES[name]]) == (px, px), name


def test_ico_holds_png_images_up_to_256(tmp_path):
    data = icons.make_ico(tmp_path / "Corral.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", data[:6])
    assert (reserved, kind, count) == (0, 1, len(icons.ICO_SIZES))
    sizes = []
    for i in range(count):
        w, h, _, _, _, _, length, offset = struct.unpack(
            "<BBBBHHII", data[6 + 16 * i : 22 + 16 * i]
        )
        image = data[offset : offset + length]
        assert icons.png_size(image) == ((w or 256), (h or 256))
        sizes.append(w or 256)
    assert sizes == list(icons.ICO_SIZES)


# ---- launcher ----


@pytest.mark.parametrize(
    "value",
    [
        {"city": "Paris"},
        {"city": ""},
        {"city": "x" * 25},
        {"city": "x" * 24},
        {"city": 3},
        {"city": "Paris", "country": "France"},
        {},
        ["Paris"],
        "Paris",
        None,
    ],
)
def test_self_test_conformance_check_agrees_with_the_schema(value):
    expected = jsonschema.Draft202012Validator(self_test.SELF_TEST_SCHEMA).is_valid(value)
    assert self_test.conforms(value) is expected


def test_frozen_launcher_points_the_engine_at_the_bundled_model(tmp_path, monkeypatch):
    model = tmp_path / "models" / "default"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    monkeypatch.setenv("CORRAL_BUNDLED_MODEL", "")  # so teardown removes what the launcher sets
    monkeypatch.delenv("CORRAL_BUNDLED_MODEL")
    assert launcher.use_bundled_model() == model
    from engine.library.load import ensure_default_model

    assert ensure_default_model() == model


def test_frozen_self_test_without_a_model_fails_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert launcher.main(["--self-test"]) == 1
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["ok"] is False and "no bundled model" in report["error"]


# ---- what the bundle holds ----


def _spec_list(name: str) -> list[str]:
    """A list literal assigned to `name` in Corral.spec (a Python file PyInstaller runs)."""
    tree = ast.parse((PACKAGING / "Corral.spec").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"Corral.spec assigns no {name}")


def test_bundle_excludes_the_benchmarks_and_the_audit_flags_them(tmp_path):
    assert "benchmarks" in _spec_list("EXCLUDES")
    bundle = _fake_bundle(tmp_path)
    (bundle / "_internal" / "benchmarks").mkdir()
    assert audit.problems(bundle) == ["_internal/benchmarks/: should not ship"]


# ---- audit and build script ----


def _fake_bundle(root: Path) -> Path:
    bundle = root / "Corral"
    (bundle / "_internal" / "models" / "default").mkdir(parents=True)
    (bundle / "Corral").write_bytes(b"\x7fELF")
    (bundle / "_internal" / "models" / "default" / "config.json").write_text("{}")
    (bundle / "_internal" / "models" / "default" / "model.safetensors").write_bytes(b"0")
    (bundle / "_internal" / "include" / "python3.11").mkdir(parents=True)
    (bundle / "_internal" / "include" / "python3.11" / "pyconfig.h").write_text("")
    return bundle


def test_audit_passes_a_clean_bundle_and_flags_leftovers(tmp_path):
    bundle = _fake_bundle(tmp_path)
    assert audit.problems(bundle) == []  # Python's pyconfig.h is needed at run time
    (bundle / "_internal" / "mlx" / "include").mkdir(parents=True)
    (bundle / "_internal" / "mlx" / "include" / "array.h").write_text("")
    (bundle / "_internal" / "libcudart.so.13").write_bytes(b"")
    assert sorted(audit.problems(bundle)) == [
        "_internal/libcudart.so.13: should not ship",
        "_internal/mlx/include/array.h: should not ship",
    ]
    shutil.rmtree(bundle / "_internal" / "mlx" / "include")
    (bundle / "_internal" / "libcudart.so.13").unlink()
    (bundle / "_internal" / ".venv").mkdir()
    (bundle / "_internal" / "torch").mkdir()
    (bundle / "_internal" / "mlx" / "__pycache__").mkdir(parents=True)
    (bundle / "_internal" / "model.gguf").write_bytes(b"GGUF")
    (bundle / "_internal" / "models" / "default" / "model.safetensors").unlink()
    found = "\n".join(audit.problems(bundle))
    for needle in (".venv/", "torch/", "__pycache__/", "model.gguf", "no weights"):
        assert needle in found


def test_build_script_is_valid_bash_and_rejects_unknown_options():
    script = PACKAGING / "build"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    usage = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "CORRAL_SIGN_IDENTITY" in usage.stdout
    bad = subprocess.run([str(script), "--frobnicate"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--frobnicate" in bad.stderr


# ---- the real bundle ----


def _last_json_line(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.startswith("{")]
    assert lines, f"no JSON report in the output:\n{text}"
    return json.loads(lines[-1])


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_built_bundle_self_test_and_gui_start(tmp_path):
    pytest.importorskip(
        "PyInstaller", reason="PyInstaller is not installed (pip install -e '.[packaging]')"
    )
    started = time.perf_counter()
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--distpath",
            str(tmp_path / "dist"),
            "--workpath",
            str(tmp_path / "work"),
            str(PACKAGING / "Corral.spec"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    build_s = time.perf_counter() - started
    assert build.returncode == 0, build.stderr[-4000:]
    bundle = tmp_path / "dist" / ("Corral.app" if sys.platform == "darwin" else "Corral")
    assert audit.problems(bundle) == []
    size_mb = audit.size_bytes(bundle) / 1e6
    print(f"\nbuild {build_s:.0f} s, bundle {size_mb:.0f} MB")

    env = {k: v for k, v in os.environ.items() if not k.startswith("CORRAL_")}
    env.update(
        XDG_CACHE_HOME=str(tmp_path / "xdg-cache"),
        XDG_DATA_HOME=str(tmp_path / "xdg-data"),
        XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
        QT_QPA_PLATFORM="offscreen",
    )
    exe = audit.executable(bundle)
    # Headless: no display, no Qt platform.
    headless = {
        k: v for k, v in env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    run = subprocess.run(
        [str(exe), "--self-test"],
        capture_output=True,
        text=True,
        env=headless,
        cwd=tmp_path,
        timeout=600,
    )
    report = _last_json_line(run.stdout)
    assert run.returncode == 0, (run.stdout, run.stderr[-4000:])
    assert report["ok"] and report["frozen"] and report["bundled_model"]
    assert set(report["qt_modules"]) <= {"PySide6.QtCore"}  # QtCore: PyInstaller's run-time hook
    jsonschema.validate(json.loads(report["text"]), self_test.SELF_TEST_SCHEMA)
    print(f"self-test: {json.dumps(report)}")
    # Nothing was imported into the user's cache: the bundled model was used as is.
    assert not (tmp_path / "xdg-cache" / "Corral" / "models").exists()

    gui = subprocess.run(
        [str(exe), "--data-dir", str(tmp_path / "data"), "--report-startup"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    events = [json.loads(line)["event"] for line in gui.stdout.splitlines() if line.startswith("{")]
    assert gui.returncode == 0, (gui.stdout, gui.stderr[-4000:])
    assert events == ["shown", "model_ready"], gui.stdout
