"""Structured output in the window: the constraint chip and its Format menu (the composer
shows them) and the editor for pasted schemas, grammars and regular expressions (the chat
and the Extract window open it)."""
