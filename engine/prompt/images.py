"""Images in prompts: checked at the edge, marked in the chat text, keyed by their content.

`check_image` decodes an attached image with Pillow under explicit limits and refuses, with
what is wrong and where, a file that is not an image, a corrupt or truncated one, and one
larger than `MAX_IMAGE_PIXELS` (a decompression bomb among them: its size is read from the
header, before any pixel is decoded). An animated image gives its first frame, and says so.
A HEIC/HEIF photo (an iPhone's) is read where a HEIF plugin for Pillow is installed
(`pillow-heif`, not a dependency: its wheels bundle GPL codecs), else refused with how to
convert it.
An image whose longer side exceeds `MAX_IMAGE_SIDE` is scaled down (vision processors
resize every image to a few hundred pixels anyway). Its `digest` is the SHA-256 of the
pixels the model will see.

`with_image_markers` writes each message's images the way the model's family does (its
writer, set at load by `engine.library.vision`: content parts such as
`[{"type": "text"}, {"type": "image"}]` for templates that place pictures themselves, or
the image token in the text) after the untrusted text was shielded
(`engine.prompt.shield`), so the template's rendering turns exactly those markers into
image tokens. `image_key_ids` gives an image's prompt
positions ids derived from its digest, outside the vocabulary, so the prompt cache's trie
tells one picture from another and reuses the prefix of the same one.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageFile, UnidentifiedImageError

from engine.types import ImageInput

# Images of more pixels are refused, with their size, before a pixel is decoded (the size
# is in the header). Pillow's own decompression-bomb limit is set explicitly, far above it:
# a header past it fails already while Pillow opens the file.
MAX_IMAGE_PIXELS = 40_000_000
PILLOW_BOMB_PIXELS = 1_000_000_000
MAX_IMAGE_BYTES = 32 * 1024 * 1024
MAX_IMAGE_SIDE = 2048  # longer sides are scaled down to this before the model's processor
FORMATS = ("PNG", "JPEG", "WEBP", "GIF")
_READS = "PNG, JPEG, WebP and GIF"
Image.MAX_IMAGE_PIXELS = PILLOW_BOMB_PIXELS
ImageFile.LOAD_TRUNCATED_IMAGES = False  # a truncated file is an error, not a grey band

_IMAGE_TOKEN_ATTR = "corral_image_token"
_IMAGE_WRITER_ATTR = "corral_image_writer"
_IMAGE_REWRITE_ATTR = "corral_image_rewrite"

# (role, text, images) -> the message's content as the model's family writes it
ImageWriter = Callable[[str, str, int], Any]


class BadImageError(ValueError):
    """An attached image Corral cannot read; the message says which and why."""


@dataclass(frozen=True)
class CheckedImage:
    """A decoded, checked image: RGB pixels, the digest of those pixels, and a note for the
    user when something was done to it (first frame of an animation, scaled down)."""

    image: Image.Image
    digest: bytes
    width: int  # as attached
    height: int
    note: str | None = None


def _label(name: str) -> str:
    return name or "the image"


def check_image(data: bytes, name: str = "") -> CheckedImage:
    """Decode and check one attached image. Raises BadImageError saying what is wrong."""
    where = _label(name)
    if not data:
        raise BadImageError(f"{where}: the file is empty")
    if len(data) > MAX_IMAGE_BYTES:
        raise BadImageError(
            f"{where}: {len(data):,} bytes; Corral reads images of at most "
            f"{MAX_IMAGE_BYTES:,} bytes"
        )
    if is_heif(data):
        heif_readable()  # registers the plugin's opener where it is installed
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=None)
    except UnidentifiedImageError:
        if is_heif(data):
            raise BadImageError(
                f"{where}: a HEIC/HEIF photo, which Corral cannot read on this system "
                f"(it reads {_READS}): export it as JPEG or PNG first (on a Mac, Preview's "
                "File > Export; on an iPhone, Settings > Camera > Formats > Most Compatible)"
            ) from None
        raise BadImageError(f"{where}: not an image Corral can read (it reads {_READS})") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise BadImageError(f"{where}: refused as a possible decompression bomb: {exc}") from None
    except Exception as exc:  # a header Pillow cannot parse
        raise BadImageError(f"{where}: the image is corrupt: {exc}") from None
    width, height = img.size
    if img.format not in FORMATS and not (img.format in HEIF_FORMATS and heif_readable()):
        raise BadImageError(f"{where}: a {img.format} image; Corral reads {_READS}")
    if width * height > MAX_IMAGE_PIXELS:
        raise BadImageError(
            f"{where}: the image is {width:,} × {height:,} pixels "
            f"({width * height / 1e6:.1f} megapixels); Corral reads images of at most "
            f"{MAX_IMAGE_PIXELS / 1e6:.0f} megapixels (larger ones can be decompression bombs): "
            f"scale it down first"
        )
    notes = []
    frames = int(getattr(img, "n_frames", 1) or 1)
    if getattr(img, "is_animated", False) and frames > 1:
        img.seek(0)
        notes.append(f"{where} is animated ({frames} frames): only its first frame is read")
    try:
        img.load()
        rgb = img.convert("RGB")
    except Exception as exc:  # truncated data, bad chunks, CRC errors
        raise BadImageError(f"{where}: the image is corrupt or truncated: {exc}") from None
    if max(width, height) > MAX_IMAGE_SIDE:
        scale = MAX_IMAGE_SIDE / max(width, height)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        rgb = rgb.resize(size, Image.Resampling.BICUBIC)
        notes.append(f"{where} ({width} × {height}) was scaled down to {size[0]} × {size[1]}")
    digest = hashlib.sha256(f"{rgb.size}".encode() + rgb.tobytes()).digest()
    return CheckedImage(rgb, digest, width, height, "; ".join(notes) or None)


# ISO base media brands of HEIC/HEIF still images (the `ftyp` box at the file's start)
_HEIF_BRANDS = (b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1", b"heif")
HEIF_FORMATS = ("HEIF", "HEIC")


def is_heif(data: bytes) -> bool:
    """Whether `data` starts like a HEIC/HEIF image file."""
    return len(data) >= 12 and data[4:8] == b"ftyp" and data[8:12] in _HEIF_BRANDS


def heif_readable() -> bool:
    """Whether Pillow reads HEIF here: a HEIF plugin (pillow-heif) is installed and opened."""
    try:
        import pillow_heif  # type: ignore[import-not-found]
    except ImportError:
        return False
    pillow_heif.register_heif_opener()
    return True


def message_images(messages: Sequence[Mapping[str, Any]]) -> list[ImageInput]:
    """Every image of `messages`, in prompt order; raises BadImageError for a malformed list."""
    found: list[ImageInput] = []
    for index, message in enumerate(messages):
        images = message.get("images") if isinstance(message, Mapping) else None
        if images is None:
            continue
        if not isinstance(images, list | tuple) or not all(
            isinstance(i, ImageInput) for i in images
        ):
            raise BadImageError(f"message {index + 1}: `images` must be a list of ImageInput")
        found.extend(images)
    return found


def set_image_token(tokenizer: Any, text: str) -> None:
    """Record on a loaded model's tokenizer the text of its image token (vision models)."""
    setattr(tokenizer, _IMAGE_TOKEN_ATTR, text)


def image_token(tokenizer: Any) -> str | None:
    """The image token's text of the model `tokenizer` belongs to; None: no images."""
    value = getattr(tokenizer, _IMAGE_TOKEN_ATTR, None)
    return value if isinstance(value, str) else None


def set_image_writer(tokenizer: Any, writer: ImageWriter) -> None:
    """Record on a loaded model's tokenizer how its family writes a message's pictures."""
    setattr(tokenizer, _IMAGE_WRITER_ATTR, writer)


def set_image_rewrite(tokenizer: Any, rewrite: Callable[[str], str]) -> None:
    """Record on a loaded model's tokenizer the text its processor writes around each image
    marker of a rendered prompt (Gemma 3's blank lines)."""
    setattr(tokenizer, _IMAGE_REWRITE_ATTR, rewrite)


def rewrite_images(tokenizer: Any, rendered: str) -> str:
    """`rendered` (the template's output) with the text around its image markers that the
    model's processor writes; unchanged for text models and most families."""
    rewrite = getattr(tokenizer, _IMAGE_REWRITE_ATTR, None)
    return str(rewrite(rendered)) if callable(rewrite) else rendered


def with_image_markers(tokenizer: Any, messages: list[Any]) -> list[Any]:
    """Shielded `messages` with each message's images written as the model's family writes
    them (its writer; else the image token before the text, one per image), and the
    `images` key dropped for the template."""
    if not any(isinstance(m, Mapping) and m.get("images") for m in messages):
        return [_without_images(m) for m in messages]
    marker = image_token(tokenizer)
    if marker is None:
        raise BadImageError("this model does not read images: load a vision model for them")
    writer = getattr(tokenizer, _IMAGE_WRITER_ATTR, None)
    out = []
    for message in messages:
        images = message.get("images") if isinstance(message, Mapping) else None
        message = _without_images(message)
        if images:
            text = message.get("content") or ""
            if callable(writer):
                message["content"] = writer(str(message.get("role")), text, len(images))
            else:
                message["content"] = marker * len(images) + ("\n" + text if text else "")
        out.append(message)
    return out


def _without_images(message: Any) -> Any:
    if isinstance(message, Mapping) and "images" in message:
        return {k: v for k, v in message.items() if k != "images"}
    return message


def image_key_ids(digest: bytes, count: int, vocab_size: int) -> list[int]:
    """`count` ids for an image's prompt positions, derived from its digest: outside the
    vocabulary (from `vocab_size` up, below 2**31) and the same for the same pixels."""
    span = (1 << 31) - 1 - vocab_size
    ids = []
    for i in range(count):
        h = hashlib.blake2b(digest + i.to_bytes(4, "little"), digest_size=8).digest()
        ids.append(vocab_size + int.from_bytes(h, "little") % span)
    return ids
