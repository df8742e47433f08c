"""The main window (window.py: one QMainWindow) and the helpers it is composed of, each
holding the window: files.py (constraint and tools files, export), models.py (loading a
model, the status bar), library.py (the model library and downloads),
preferences_actions.py (the Preferences dialog opened, its changes shown), menus.py,
mcp.py (the MCP panel and cards), and shell.py (the sidebar | chat | inspector layout)."""
