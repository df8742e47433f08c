"""Dev-only scripts that run the real coding agents (Claude Code, Codex, OpenCode) against
Corral: recording their requests as test fixtures (record.py) and whole sessions end to end
(end_to_end.py)."""
