"""The engine bridge over many replies: finished ReplyJobs are deleted, requests let go of
their events, and what the status bar shows comes from the engine's published snapshot."""

from __future__ import annotations

import gc

from app_helpers import close_window, make_window, wait_idle
from PySide6.QtCore import QCoreApplication, QEvent

from app.jobs.engine_bridge import ReplyJob
from app.store import ChatSettings
from engine.runtime.handle import RequestHandle

REPLIES = 200


def _live(kind: type) -> int:
    """Objects of `kind` alive once deferred deletes have run and garbage is collected."""
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    return sum(isinstance(o, kind) for o in gc.get_objects())


def test_two_hundred_replies_leave_no_jobs_or_queued_events(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    conv = window.controller.conversation
    window.store.set_chat_settings(conv.id, ChatSettings(max_tokens=2, seed=1))
    window.controller.open_conversation(conv.id)
    backlogs: list[int] = []  # events each finished request still held in a queue
    jobs_before = _live(ReplyJob)
    handles_before = _live(RequestHandle)
    window.send("Hello")
    wait_idle(qtbot, window)
    counts = []
    for i in range(REPLIES - 1):
        window.regenerate()
        job = window.controller.job
        assert job is not None and job.handle is not None
        handle = job.handle
        wait_idle(qtbot, window)
        backlogs.append(handle.backlog)
        del job, handle
        if i in (20, REPLIES - 2):
            counts.append((_live(ReplyJob), _live(RequestHandle)))
    path = window.controller.path()
    assert len(window.store.siblings(path[-1])) == REPLIES  # every reply was made and kept
    assert max(backlogs) == 0  # events went to the job's callback only, never also a queue
    assert window.bridge.jobs == frozenset() and not window.bridge.findChildren(ReplyJob)
    # no growth between reply 22 and reply 200, and nothing left over at the end
    assert counts[0] == counts[1] == (jobs_before, handles_before), counts
    close_window(window)


def test_status_bar_shows_the_engine_snapshot(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    conv = window.controller.conversation
    window.store.set_chat_settings(conv.id, ChatSettings(max_tokens=8, seed=1))
    window.send("Fill the cache")
    wait_idle(qtbot, window)
    window.models.update_status()
    snapshot = window.bridge.snapshot()
    assert snapshot.model is not None and snapshot.cache.entries >= 1
    from app.views.common.format import format_bytes

    text = window.cache_label.text()
    assert text.startswith(f"Memory for reuse: {format_bytes(snapshot.cache.bytes)}")
    assert f"({snapshot.cache.entries} earlier prompt" in window.cache_label.toolTip()
    close_window(window)
