"""The inspector on the right of the chat: its tabs (panel.py), the conversation's settings
and thinking switch, and its tools."""
