"""OpenAI's Files and Batch API on the local server: a JSONL file of chat completion or
Responses requests in, a JSONL file of their responses out, run in the background through
the same engine as the online requests (which go first), kept across restarts.

`lines` checks an input file and states the limits, `store` keeps files, batches and each
line's result in SQLite, `translate` runs a line through the online endpoints' own
translation and response shapes, `worker` runs batches on a thread, `endpoints` are the
routes.
"""

from __future__ import annotations

from engine.server.batches.endpoints import BatchAPI

__all__ = ["BatchAPI"]
