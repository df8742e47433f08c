"""Documents generated for extraction (the `extract` bench section and the tests): PDFs
through fpdf2 (pages with a text layer, pages without one), DOCX through python-docx, HTML
and text, and a folder of them mixed; the invoice schema their rows are read under."""

from __future__ import annotations

import io
from pathlib import Path

INVOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "vendor": {"type": "string", "maxLength": 40},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
    },
    "required": ["vendor", "total", "paid"],
}


def invoice_text(i: int) -> str:
    return f"Invoice {i} from Vendor{i} Ltd. Total due: {100 + i}.50 EUR. Status: paid."


def make_pdf(path: Path, pages: list[str | None], *, password: str | None = None) -> Path:
    """A PDF with one page per entry: its text, or a drawing without text for None."""
    from fpdf import FPDF

    pdf = FPDF()
    if password is not None:
        pdf.set_encryption(owner_password="owner", user_password=password)
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text is None:
            pdf.set_fill_color(30, 30, 30)
            pdf.rect(20, 20, 120, 60, style="F")  # a scan's pixels: no text layer
        else:
            pdf.multi_cell(0, 8, text)
    path.write_bytes(bytes(pdf.output()))
    return path


def make_blank_pdf(path: Path, pages: int) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
    path.write_bytes(bytes(pdf.output()))
    return path


def make_docx(path: Path, paragraphs: list[str], table: list[list[str]] | None = None) -> Path:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, cells in enumerate(table):
            for c, value in enumerate(cells):
                grid.cell(r, c).text = value
    document.save(str(path))
    return path


def make_html(path: Path, body: str) -> Path:
    path.write_text(
        "<!doctype html><html><head><title>t</title><style>p{color:red}</style>"
        "<script>var menu = 'NAVSCRIPT';</script></head><body>"
        "<nav>Home | Products | NAVLINK</nav><header>SITE HEADER</header>"
        f"<main><h1>Receipt</h1><p>{body}</p></main>"
        "<footer>FOOTER TEXT</footer></body></html>",
        encoding="utf-8",
    )
    return path


def make_png(path: Path) -> Path:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 32), (200, 30, 30)).save(out, format="PNG")
    path.write_bytes(out.getvalue())
    return path


def mixed_folder(folder: Path, count: int = 20) -> list[Path]:
    """`count` documents, cycling through PDF, DOCX, HTML, Markdown and plain text."""
    folder.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    for i in range(count):
        text = invoice_text(i)
        kind = i % 5
        if kind == 0:
            made.append(make_pdf(folder / f"doc{i:02}.pdf", [text, f"Page two of invoice {i}."]))
        elif kind == 1:
            made.append(make_docx(folder / f"doc{i:02}.docx", [text], [["item", "amount"]]))
        elif kind == 2:
            made.append(make_html(folder / f"doc{i:02}.html", text))
        elif kind == 3:
            path = folder / f"doc{i:02}.md"
            path.write_text(f"# Invoice {i}\n\n{text}\n", encoding="utf-8")
            made.append(path)
        else:
            path = folder / f"doc{i:02}.txt"
            path.write_text(text + "\n", encoding="utf-8")
            made.append(path)
    return made
