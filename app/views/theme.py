"""The app's style sheet. Colours come from the system palette (`palette(...)`), so light
and dark mode follow the system with no theme switch of our own."""

from __future__ import annotations

STYLE_SHEET = """
#chatColumn { background: palette(base); }
#message { border-radius: 10px; border: 1px solid transparent; }
#message[role="user"] { background: palette(alternate-base); border-color: palette(midlight); }
#message[role="assistant"] { background: palette(base); border-color: palette(midlight); }
#roleName { font-weight: 600; }
#constraintBadge {
    color: palette(highlighted-text); background: palette(highlight);
    border-radius: 8px; padding: 1px 8px; font-size: 11px;
}
#stats, #replyStatus, #hint, #emptyState { color: palette(mid); }
#stats, #replyStatus { font-size: 11px; }
#emptyState { padding: 60px 40px; }
#toolCard {
    background: palette(alternate-base); border: 1px solid palette(mid); border-radius: 8px;
}
#toolTitle { font-weight: 500; }
#constraintChip {
    border: 1px solid palette(highlight); border-radius: 12px; background: palette(base);
}
#chipLabel { font-weight: 500; }
#constraintError, #toolsStatus[error="true"], #noticeBar[kind="error"] QLabel,
#toolError { color: #d0342c; }
#noticeBar { border-bottom: 1px solid palette(mid); background: palette(alternate-base); }
#composer { border: 1px solid palette(mid); border-radius: 8px; padding: 4px; }
"""
