"""An image in a chat message: the bytes a user attached, checked by the engine.

Front ends put images on a message as `ChatMessage["images"]` (a list of ImageInput, read
in order, before the message's text). The bytes are kept as given; `engine.prompt.images`
decodes and checks them (format, size, corruption) and says what is wrong and where.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ImageInput:
    """One attached image: its encoded bytes (PNG, JPEG, WebP or GIF) and a name that
    error messages use (a file name, or "image 2 of message 3")."""

    data: bytes = field(repr=False)
    name: str = ""

    def __repr__(self) -> str:
        return f"ImageInput({self.name or 'image'!r}, {len(self.data)} bytes)"
