"""Reading documents for extraction: each format's text, page numbers, and hostile files
refused one by one with a sentence naming the file and the reason."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from engine.extract.document import file_digest, read_document, sniff
from engine.extract.html_text import main_text
from engine.extract.pages import MAX_HTML_BYTES, MAX_PAGES, UnreadableDocument
from engine.files import FileRefused
from tests.extract_support import (
    make_blank_pdf,
    make_docx,
    make_html,
    make_pdf,
    make_png,
)


def test_pdf_pages_keep_their_text_and_numbers(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "a.pdf", ["Invoice 7 from ACME", "Total: 12.50 EUR"])
    document = read_document(path)
    assert document.kind == "pdf" and document.page_count == 2
    assert [p.number for p in document.pages] == [1, 2]
    assert "ACME" in document.pages[0].text and "12.50" in document.pages[1].text


def test_pdf_page_without_text_is_noted_without_vision_and_a_picture_with_it(
    tmp_path: Path,
) -> None:
    path = make_pdf(tmp_path / "scan.pdf", ["Cover letter", None])
    plain = read_document(path)
    assert [p.number for p in plain.pages] == [1]
    assert "page 2 without text" in plain.notes[0]
    seen = read_document(path, vision=True)
    assert seen.pages[1].number == 2 and seen.pages[1].image is not None
    assert seen.pages[1].image.startswith(b"\x89PNG")


def test_a_pdf_with_no_text_at_all_is_unreadable_without_vision(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "scan.pdf", [None])
    with pytest.raises(UnreadableDocument, match="no page has text"):
        read_document(path)


def test_page_range_reads_only_those_pages(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "a.pdf", ["one", "two", "three", "four"])
    document = read_document(path, pages=(2, 3))
    assert [p.text for p in document.pages] == ["two", "three"]
    assert document.page_count == 4


def test_encrypted_pdf_is_refused_as_such(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "locked.pdf", ["secret"], password="pw")
    with pytest.raises(UnreadableDocument, match="locked.pdf: the PDF is encrypted"):
        read_document(path)


def test_malformed_pdf_is_refused(tmp_path: Path) -> None:
    good = make_pdf(tmp_path / "good.pdf", ["text"]).read_bytes()
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(good[: len(good) // 3])
    with pytest.raises(UnreadableDocument, match="broken.pdf"):
        read_document(bad)


def test_ten_thousand_page_pdf_is_refused_unless_a_range_is_given(tmp_path: Path) -> None:
    path = make_blank_pdf(tmp_path / "huge.pdf", 10_000)
    with pytest.raises(UnreadableDocument, match=f"10,000 pages; at most {MAX_PAGES:,}"):
        read_document(path)
    with pytest.raises(UnreadableDocument, match="no page has text"):
        read_document(path, pages=(9_990, 10_000))  # read, but blank


def test_docx_paragraphs_and_table_rows(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "a.docx", ["Hello from Word"], [["item", "price"], ["pen", "2"]])
    document = read_document(path)
    assert "Hello from Word" in document.text
    assert "item | price" in document.text and "pen | 2" in document.text


def test_docx_decompression_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b"\0" * (64 << 20))
    assert path.stat().st_size < 1 << 20
    with pytest.raises(UnreadableDocument, match="decompression bomb"):
        read_document(path)


def test_html_keeps_the_main_text_only(tmp_path: Path) -> None:
    path = make_html(tmp_path / "a.html", "Paid 42.00 at Cafe &amp; Bar")
    text = read_document(path).text
    assert "Paid 42.00 at Cafe & Bar" in text and "Receipt" in text
    for boilerplate in ("NAVLINK", "NAVSCRIPT", "SITE HEADER", "FOOTER TEXT", "color:red"):
        assert boilerplate not in text


def test_html_without_a_main_element_drops_boilerplate_only() -> None:
    text = main_text("<body><nav>menu</nav><div>First</div><p>Second<br>line</p></body>")
    assert text == "First\n\nSecond\nline"


def test_huge_html_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.html"
    path.write_text("<p>" + "x" * (MAX_HTML_BYTES + 10) + "</p>")
    with pytest.raises(UnreadableDocument, match="huge.html: HTML of"):
        read_document(path)


def test_long_text_is_cut_into_pages_at_paragraphs(tmp_path: Path) -> None:
    path = tmp_path / "long.md"
    paragraphs = [f"Paragraph {i}. " + "word " * 100 for i in range(40)]
    path.write_text("\n\n".join(paragraphs))
    document = read_document(path)
    assert len(document.pages) > 5
    for page in document.pages:
        assert page.text.startswith("Paragraph")  # never cut inside a paragraph


@pytest.mark.parametrize("name", ["fake.pdf", "fake.docx", "fake.txt", "fake.html", "fake.png"])
def test_binary_with_a_documents_extension_is_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(4096))
    with pytest.raises(UnreadableDocument, match=f"{name}: named as .*, but the file is binary"):
        read_document(path, vision=True)


def test_an_image_needs_a_model_that_reads_images(tmp_path: Path) -> None:
    path = make_png(tmp_path / "form.png")
    with pytest.raises(UnreadableDocument, match="does not read images"):
        read_document(path)
    assert read_document(path, vision=True).pages[0].image == path.read_bytes()


def test_unknown_format_device_and_folder_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.xyz").write_text("x")
    with pytest.raises(UnreadableDocument, match="not a format Corral reads"):
        read_document(tmp_path / "a.xyz")
    (tmp_path / "dir.txt").mkdir()
    with pytest.raises(UnreadableDocument, match="dir.txt"):
        read_document(tmp_path / "dir.txt")


def test_sniff_tells_formats_by_their_bytes() -> None:
    assert sniff(b"%PDF-1.7\n") == "pdf"
    assert sniff(b"PK\x03\x04rest") == "zip"
    assert sniff(b"\x89PNG\r\n\x1a\n") == "image"
    assert sniff("héllo wörld".encode()) == "text"
    assert sniff(b"abc\x00def") == "binary"


def test_a_files_digest_is_its_sha256_and_a_folder_has_none(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 300_000)
    assert file_digest(path) == hashlib.sha256(b"x" * 300_000).hexdigest()
    path.write_bytes(b"changed")
    assert file_digest(path) == hashlib.sha256(b"changed").hexdigest()
    with pytest.raises(FileRefused, match="is a folder"):
        file_digest(tmp_path)
