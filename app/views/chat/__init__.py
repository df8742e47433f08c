"""The chat: the conversation view (view.py), each message (message_widget.py) and its
parts (markdown, thinking, JSON replies, tool-call cards, the token view), the welcome view,
and the composer with its attachments and tools chip."""
