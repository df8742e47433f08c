"""OpenAI's Responses API over the shared core: `schemas` (request bodies), `translate`
(bodies into ChatRequests), `replies` (responses and their streamed events), `store`
(stored responses in SQLite), `endpoints` (the routes)."""

from __future__ import annotations

from engine.server.openai_responses.endpoints import ResponsesAPI

__all__ = ["ResponsesAPI"]
