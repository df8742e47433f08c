"""Serving from the window: the local server's Preferences section, status and log, the
coding agents pointed at it, and the distributed group (several Macs, one model)."""
