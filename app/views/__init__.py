"""The widgets, in rooms: the main window (main/: the window, its helpers, sidebar and
notice strips) over one room per window or concern (chat/, inspector/, preferences/,
library/, mcp/, server/, extract/), the constraint chip and editor two of them share
(constraints/), and the building blocks all share (common/). Views show what the chat
controller and the jobs report and call their methods; nothing below them imports them, and
the rooms import only constraints/ and common/ (the import contracts in pyproject.toml)."""
