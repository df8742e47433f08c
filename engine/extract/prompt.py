"""The request for one row: the schema and instruction first (the same for every row of a
job, so the prompt cache computes that prefix once and every row reuses it), the document's
pages after.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from engine.extract.pages import Document, Page
from engine.extract.windows import Window
from engine.types import ChatMessage, ChatRequest, ConstraintSpec, ImageInput, SamplingSettings

SYSTEM = (
    "You extract information from one document into JSON. Reply with one JSON object that "
    "follows this JSON schema; take every value from the document, and where the document "
    "does not give one, use null where the schema allows it.\n\nSchema:\n{schema}"
)


def system_prompt(schema: dict[str, Any], instruction: str) -> str:
    """The job's shared instructions: the schema, then the user's own instruction."""
    text = SYSTEM.format(schema=json.dumps(schema, indent=1, ensure_ascii=False))
    if instruction.strip():
        text += f"\n\nInstructions:\n{instruction.strip()}"
    return text


def row_request(
    constraint: ConstraintSpec,
    system: str,
    name: str,
    window: Window,
    *,
    paged: bool,
    page_count: int,
    max_tokens: int,
) -> ChatRequest:
    """The request decoding one window of one document under the job's compiled schema."""
    heading = f"Document: {name}"
    if paged and page_count > 1:
        heading += f" (pages {window.first}-{window.last} of {page_count})"
    parts = [heading, *_page_texts(window.pages, paged)]
    message: ChatMessage = {"role": "user", "content": "\n\n".join(parts)}
    images = [ImageInput(p.image, f"{name} page {p.number}") for p in window.pages if p.image]
    if images:
        message["images"] = images
    return ChatRequest(
        [{"role": "system", "content": system}, message],
        SamplingSettings(temperature=0.0, max_tokens=max_tokens),
        constraint=constraint,
    )


def attached_text(document: Document) -> str:
    """A document as it goes into a chat message: its name and page span, then its text, each
    PDF page after a `[page N]` marker (the form a job's rows read too). The same file gives
    the same text, so the prompt cache reuses it for a second question."""
    first, last = document.pages[0].number, document.pages[-1].number
    span = f", pages {first}-{last} of {document.page_count}" if document.kind == "pdf" else ""
    parts = [f"[document: {document.path.name}{span}]"]
    parts += _page_texts(document.pages, document.kind == "pdf")
    parts.append("[end of document]")
    return "\n\n".join(parts)


def _page_texts(pages: Iterable[Page], paged: bool) -> list[str]:
    """The pages' texts (pages kept as pictures have none), each after a `[page N]` marker
    where the document has real pages (a PDF)."""
    return [f"[page {p.number}]\n{p.text}" if paged else p.text for p in pages if p.text]
