"""Running extraction jobs on the tiny model: every row valid under the schema (decoding is
constrained), hostile files recorded without stopping the job, long documents read in page
windows, pause and resume doing no row twice, a changed file read again."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from engine.extract.document import file_digest
from engine.extract.runner import ExtractError, ExtractRunner
from engine.extract.store import JobSettings, JobStore
from tests.extract_support import INVOICE_SCHEMA, invoice_text, make_pdf, mixed_folder


def _job(store: JobStore, paths: list[Path], **settings: object) -> str:
    job = store.create_job(INVOICE_SCHEMA, settings=JobSettings(max_tokens=40, **settings))  # type: ignore[arg-type]
    store.add_documents(job.id, [(str(p), file_digest(p)) for p in paths])
    return job.id


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "jobs.sqlite3")


def test_twenty_mixed_documents_all_rows_valid_and_a_hostile_one_unreadable(
    tiny_engine, store: JobStore, tmp_path: Path
) -> None:
    paths = mixed_folder(tmp_path / "docs", 20)
    hostile = tmp_path / "docs" / "fake.pdf"
    hostile.write_bytes(b"MZ\x90\x00" + bytes(range(256)) * 8)
    job = _job(store, [*paths, hostile])
    seen: list[str] = []
    progress = ExtractRunner(tiny_engine, store, job, on_row=lambda r, p: seen.append(r.path)).run()
    rows = store.rows(job)
    assert progress.counts["valid"] == 20 and progress.counts["unreadable"] == 1
    for row in rows:
        if row.path == str(hostile):
            assert row.status == "unreadable" and "named as a PDF" in (row.error or "")
            continue
        assert row.status == "valid", row.error
        jsonschema.validate(row.result, INVOICE_SCHEMA)
    assert sorted(seen) == sorted(r.path for r in rows)  # each row reported once
    assert store.job(job).state == "done"  # type: ignore[union-attr]


def test_long_document_is_read_in_page_windows_named_by_pages(
    tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path, tmp_path: Path
) -> None:
    from benchmarks.tiny_model import build_tiny_model
    from engine.engine import Engine

    folder = build_tiny_model(tmp_path_factory.mktemp("ctx"), default_model_dir, context=640)
    engine = Engine()
    try:
        engine.load_model(str(folder)).result()
        pages = [invoice_text(i) + " Details: " + "line item, " * 60 for i in range(6)]
        path = make_pdf(tmp_path / "long.pdf", pages)
        store = JobStore(tmp_path / "jobs.sqlite3")
        job = _job(store, [path])
        ExtractRunner(engine, store, job).run()
        rows = store.rows(job)
        assert len(rows) > 1
        assert rows[0].first_page == 1 and rows[-1].last_page == 6
        for before, after in zip(rows, rows[1:], strict=False):
            assert after.first_page == (before.last_page or 0) + 1  # every page, once
        assert all(r.status == "valid" and r.pages for r in rows)
        # A page range reads only those pages, as one row when they fit, named by them.
        ranged = _job(store, [path], pages=(2, 2))
        ExtractRunner(engine, store, ranged).run()
        (row,) = store.rows(ranged)
        assert row.status == "valid" and row.pages == "2"
    finally:
        engine.close()


def test_paused_job_resumes_with_no_row_done_twice(
    tiny_engine, store: JobStore, tmp_path: Path
) -> None:
    paths = mixed_folder(tmp_path / "docs", 10)
    job = _job(store, paths)
    runner = ExtractRunner(tiny_engine, store, job, limit=lambda: 2)
    runner.on_row = lambda row, progress: runner.pause()
    first = runner.run()
    assert store.job(job).state == "paused"  # type: ignore[union-attr]
    assert 1 <= first.done < 10
    done_before = {r.id: r.result for r in store.rows(job) if r.status != "pending"}
    ExtractRunner(tiny_engine, store, job).run()
    rows = store.rows(job)
    assert all(r.status == "valid" and r.completions == 1 for r in rows)
    assert {r.id: r.result for r in rows if r.id in done_before} == done_before


def test_a_changed_file_is_read_again_an_unchanged_one_not(
    tiny_engine, store: JobStore, tmp_path: Path
) -> None:
    paths = mixed_folder(tmp_path / "docs", 3)
    job = _job(store, paths)
    ExtractRunner(tiny_engine, store, job).run()
    before = {r.path: r.id for r in store.rows(job)}
    paths[2].write_text("Invoice 99 from Changed GmbH. Total 1.00", encoding="utf-8")
    added = store.add_documents(job, [(str(p), file_digest(p)) for p in paths])
    assert added == 1
    assert [r.path for r in store.rows(job, "pending")] == [str(paths[2])]
    ExtractRunner(tiny_engine, store, job).run()
    after = {r.path: r.id for r in store.rows(job)}
    assert after[str(paths[0])] == before[str(paths[0])]  # the same row, not redone
    assert after[str(paths[2])] != before[str(paths[2])]
    assert all(r.status == "valid" and r.completions == 1 for r in store.rows(job))


def test_a_schema_the_engine_refuses_stops_the_job_before_any_row(
    tiny_engine, store: JobStore, tmp_path: Path
) -> None:
    job = store.create_job({"type": "object", "properties": {"a": {"type": "nope"}}})
    with pytest.raises(ExtractError, match="the schema cannot be used"):
        ExtractRunner(tiny_engine, store, job.id).run()


def test_images_and_scanned_pages_go_to_a_vision_model(vision_engine, tmp_path: Path) -> None:
    """A PNG and a PDF page without text become rows read from their pixels; a PDF's text
    page beside the scan is read as text."""
    from tests.extract_support import make_png

    png = make_png(tmp_path / "form.png")
    scan = make_pdf(tmp_path / "scan.pdf", [invoice_text(1), None])
    store = JobStore(tmp_path / "jobs.sqlite3")
    job = _job(store, [png, scan])
    ExtractRunner(vision_engine, store, job).run()
    rows = store.rows(job)
    # The scan is a window of its own: two rows for the PDF, named by their pages.
    assert sorted((Path(r.path).name, r.pages) for r in rows) == [
        ("form.png", "1"), ("scan.pdf", "1"), ("scan.pdf", "2"),
    ]  # fmt: skip
    assert all(r.status == "valid" for r in rows), [(r.path, r.error) for r in rows]
    for row in rows:
        jsonschema.validate(row.result, INVOICE_SCHEMA)
