"""Several Macs in the window: the Preferences section *Distributed* describes the hostfile
it is given, and when the group cannot serve (here a second host ssh cannot reach), the
reply's error names the rank and host and the window offers to go on with this Mac alone,
which loads the model locally."""

from __future__ import annotations

import json
from pathlib import Path

from app_helpers import close_window, make_window, screenshot

from engine.pool import ModelPool

UNREACHABLE = [
    {"ssh": "127.0.0.1", "ips": ["127.0.0.1"]},
    {"ssh": "corral-test-unreachable.invalid", "ips": ["127.0.0.1"]},
]


def test_the_distributed_section_describes_the_hostfile(qtbot, tmp_path, tiny_engine):
    from app.views.server.distributed_controls import DistributedSettingsGroup

    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps(UNREACHABLE))
    window = make_window(qtbot, tmp_path, tiny_engine)
    try:
        window.preferences.show()
        section = window.preferences.dialog.findChild(DistributedSettingsGroup)
        assert section is not None and not section.enabled.isChecked()
        section.hostfile.setText(str(hosts))
        assert "2 machines over ring: this machine, corral-test-unreachable.invalid" in (
            section.hint.text()
        )
        section.hostfile.setText(str(tmp_path / "nope.json"))
        assert "no such hostfile" in section.hint.text()
        section.hostfile.setText(str(hosts))
        screenshot(window.preferences.dialog, "preferences-distributed")
        window.preferences.dialog.close()  # off: nothing switches
        assert window.bridge.current_engine is tiny_engine
        assert window.store.get_setting("distributed_hostfile") == str(hosts)
    finally:
        close_window(window)


def test_a_failed_group_offers_this_mac_alone(qtbot, tmp_path: Path, tiny_model_dir: Path):
    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store
    from app.views.server.distributed_controls import FALL_BACK

    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps(UNREACHABLE))
    store = Store.open(tmp_path)
    store.set_setting("distributed_enabled", True)
    store.set_setting("distributed_hostfile", str(hosts))
    bridge = EngineBridge()
    window = build_window(store, bridge)  # restores the group: the first load goes to it
    qtbot.addWidget(window)
    window.show()
    try:
        window.models.load(str(tiny_model_dir))
        qtbot.waitUntil(lambda: window.notice.action.isVisible(), timeout=120_000)
        text = window.notice.text()
        assert "rank 1 (corral-test-unreachable.invalid)" in text, text
        assert window.notice.action.text() == FALL_BACK
        assert window.distributed.status_label.text() == "Distributed group stopped"
        window.notice.action.click()
        qtbot.waitUntil(lambda: bridge.model_info is not None, timeout=120_000)
        # this Mac alone: the local model pool now serves (every engine has `failure`)
        assert bridge.group_failure is None and type(bridge.current_engine) is ModelPool
        assert store.get_setting("distributed_enabled") is False
        assert bridge.model_info.name == tiny_model_dir.name
    finally:
        close_window(window)
        bridge.close()
