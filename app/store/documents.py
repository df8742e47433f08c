"""Documents attached to a message: the text the model reads (a PDF's pages after `[page N]`
markers, read by engine.extract), kept with the message in its meta, apart from what the
user typed. The chat shows the question with a chip per document (name, pages, tokens);
the model reads each document's text before the question, as if pasted there, so a second
question about the same file reuses its computed prefix."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

META_KEY = "documents"  # where a message keeps its documents (a list of to_meta())


@dataclass(frozen=True)
class AttachedDocument:
    """One document as attached: its name and path, the pages read (`first`–`last` of
    `page_count`), how many tokens its text is, and the text itself."""

    name: str
    path: str
    first: int
    last: int
    page_count: int
    tokens: int
    text: str

    @property
    def pages(self) -> str:
        """ "1 page", "12 pages", "pages 3–5 of 40" (a part of a longer document)."""
        read = self.last - self.first + 1
        if read < self.page_count:
            span = f"page {self.first}" if read == 1 else f"pages {self.first}\u2013{self.last}"
            return f"{span} of {self.page_count}"
        return "1 page" if read == 1 else f"{read} pages"

    def summary(self) -> str:
        """ "report.pdf · 2 pages · 1,234 tokens": what its chip says."""
        return f"{self.name} · {self.pages} · {self.tokens:,} tokens"

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_meta(cls, data: Mapping[str, Any]) -> AttachedDocument | None:
        """The document a message's meta holds, or None for a damaged entry."""
        try:
            return cls(
                name=str(data["name"]),
                path=str(data.get("path", "")),
                first=int(data["first"]),
                last=int(data["last"]),
                page_count=int(data["page_count"]),
                tokens=int(data["tokens"]),
                text=str(data["text"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


def message_documents(meta: Mapping[str, Any]) -> list[AttachedDocument]:
    """The documents a message carries (none for most)."""
    entries = meta.get(META_KEY) or []
    found = [AttachedDocument.from_meta(e) for e in entries if isinstance(e, Mapping)]
    return [d for d in found if d is not None]


def with_documents(content: str, documents: Iterable[AttachedDocument]) -> str:
    """What the model reads for a message: each document's text, then what was typed."""
    texts = [d.text for d in documents]
    return "\n\n".join([*texts, content] if content else texts)
