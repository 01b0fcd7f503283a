"""Scanned documents and big tables through the real parser process, embedder and index.

OCR runs by default (RapidOCR with the models inside its wheel): a scanned PDF with an English and a
Chinese page, a PDF mixing a text page and a scanned one, a two-page TIFF and a sideways photo of
text are all searchable and cited at their page, marked as OCR text. A workbook whose header is
merged across two rows is streamed into sections that repeat the sheet and the header, so a late
row is found with its columns; row and cell limits give a note or `too_large`, never a crash; the
job row shows live totals while the sync runs. The sync hands chunks over in parts of 16, so the
workbook is indexed a part at a time, and a table that reaches the cell limit after some of its parts
were written is left with no points at all.
"""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

import pytest

from assistant.core.db.models import Document
from assistant.core.errors import IngestError
from assistant.core.index.payload import document_id
from assistant.core.principals import ANONYMOUS
from assistant.retrieval import Retriever
from ingest.readers import Limits, parse_file
from tests.conftest import CORPUS_MODEL, make_settings, open_resources

FONT = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")
if not FONT.is_file():
    pytest.skip(f"the CJK font {FONT} (Debian fonts-wqy-zenhei) is not installed", allow_module_level=True)

EN_PAGE = ["Quarterly audit of the Rotterdam warehouse", "starts on the first Monday of March."]
ZH_PAGE = ["仓库盘点每季度进行一次", "负责人是物流部的王经理"]
MIXED_SCAN = ["The forklift licence must be renewed", "every twenty four months."]
TIFF_PAGES = [["Visitor badges are returned", "at the reception desk."], ["Parking permits expire", "on the last day of June."]]
ROTATED = ["Fire doors on level four", "stay closed at all times."]
LATE_ROW = 380
ROWS = 400
PART_CHUNKS = 16  # chunks per part handed over, and per embedding batch: every part is written on its own
MAX_CELLS = 2400  # the workbook has about 1,600 cells; tickets.csv reaches the limit at row 800


def page_image(lines: list[str], *, angle: int = 0):
    """White page with `lines` in black (the CJK font draws both scripts), rotated by `angle` degrees."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(str(FONT), 40)
    image = Image.new("L", (1000, 760), 255)  # no side under 736 px: the detector would upscale it
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((40, 40 + 60 * n), line, font=font, fill=0)
    return image.rotate(angle, expand=True, fillcolor=255) if angle else image


def scanned_pdf(pages: list[list[str]]) -> bytes:
    """An image-only PDF, one scanned page per entry."""
    images = [page_image(p).convert("RGB") for p in pages]
    buffer = io.BytesIO()
    images[0].save(buffer, format="PDF", save_all=True, append_images=images[1:], resolution=150)
    return buffer.getvalue()


def mixed_pdf(text: str, scan: list[str]) -> bytes:
    """Page 1 with a text layer (Helvetica), page 2 a scanned image."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"),
    })
    page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})})
    content = DecodedStreamObject()
    content.set_data(f"BT /F1 14 Tf 72 700 Td ({text}) Tj ET".encode("latin-1"))
    page[NameObject("/Contents")] = writer._add_object(content)
    writer.append(PdfReader(io.BytesIO(scanned_pdf([scan]))))
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def inventory_workbook(path: Path, rows: int) -> None:
    """Sheets 'Readme' and 'Inventory' (a header merged over two rows: 'Location' over 'Building' and
    'Room'; 'Asset tag' and 'Owner' merged down) with `rows` rows of assets, and a small 'Sites'."""
    from openpyxl import Workbook

    book = Workbook()
    readme = book.active
    readme.title = "Readme"
    readme.append(["Asset inventory exported from the facilities database"])
    sheet = book.create_sheet("Inventory")
    sheet.append(["Asset tag", "Location", None, "Owner"])
    sheet.append([None, "Building", "Room", None])
    sheet.merge_cells("A1:A2")
    sheet.merge_cells("B1:C1")
    sheet.merge_cells("D1:D2")
    for n in range(3, rows + 1):
        owner = "Zebulon Quartermaine" if n == LATE_ROW else f"Employee {n % 97}"
        sheet.append([f"A-{n:05d}", f"B-{n % 7}", f"R-{n}", owner])
    sites = book.create_sheet("Sites")
    sites.append(["Site", "City"])
    sites.append(["HQ", "Utrecht"])
    book.save(path)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """The generated scans and workbook, synced once with OCR on (the default) and MiniLM; yields
    (resources, outcomes by file, the live totals seen in the job row while the sync ran)."""
    from assistant.core.db.jobs import recent_jobs
    from ingest.pipeline import Ingestor

    root = tmp_path_factory.mktemp("scans")
    docs = root / "docs"
    docs.mkdir()
    (docs / "scanned.pdf").write_bytes(scanned_pdf([EN_PAGE, ZH_PAGE]))
    (docs / "mixed.pdf").write_bytes(mixed_pdf("Safety handbook for the loading bays", MIXED_SCAN))
    frames = [page_image(p) for p in TIFF_PAGES]
    frames[0].save(docs / "scan.tiff", save_all=True, append_images=frames[1:], compression="tiff_lzw")
    page_image(ROTATED, angle=90).save(docs / "rotated.png")
    inventory_workbook(docs / "inventory.xlsx", ROWS)
    _csv(docs / "tickets.csv", 850)
    res = open_resources(make_settings(root / "var", embedding_model=CORPUS_MODEL, parse_part_chunks=PART_CHUNKS,
                                       embedding_batch_chunks=PART_CHUNKS))
    ingestor = Ingestor(res)
    running: list[dict] = []
    events: list[dict] = []

    def watch(snapshot: dict) -> None:  # what `assistant jobs` reads while the job runs, and the CLI's bar
        events.append(dict(snapshot))
        job = recent_jobs(res.db, 1)[0]
        if job.status == "running" and job.totals:
            running.append(dict(job.totals))

    try:
        with pytest.MonkeyPatch.context() as patch:  # the parser process reads its limits from the environment
            patch.setenv("ASSISTANT_MAX_SHEET_CELLS", str(MAX_CELLS))
            # These tests cover a sheet as row groups (tests/service/test_sheet_tables.py: as a table).
            patch.setenv("ASSISTANT_TABLE_MIN_ROWS", "0")
            outcomes = {o.source: o for o in ingestor.sync(docs, on_progress=watch)}
    finally:
        ingestor.close()
    yield res, outcomes, {"job_rows": running, "events": events}
    res.close()


def _search(res, query: str, top_k: int = 5):
    return Retriever(store=res.store, embedder=res.embedder).retrieve(query, principal=ANONYMOUS, top_k=top_k)


@pytest.mark.parametrize(
    ("query", "source", "page", "wanted"),
    [
        ("audit of the Rotterdam warehouse", "scanned.pdf", 1, "Rotterdam warehouse"),
        ("仓库盘点每季度进行一次", "scanned.pdf", 2, "仓库盘点"),
        ("forklift licence renewed", "mixed.pdf", 2, "forklift licence"),
        ("Safety handbook loading bays", "mixed.pdf", 1, "Safety handbook"),
        ("parking permits expire", "scan.tiff", 2, "Parking permits"),
        ("visitor badges reception desk", "scan.tiff", 1, "Visitor badges"),
        ("fire doors on level four", "rotated.png", 1, "Fire doors"),
    ],
    ids=["scan-en", "scan-zh", "mixed-scanned-page", "mixed-text-page", "tiff-page-2", "tiff-page-1", "rotated"],
)
def test_scanned_text_is_found_and_cited_at_its_page(ingested, query, source, page, wanted):
    res, outcomes, _ = ingested
    assert outcomes[source].status == "done", outcomes[source]
    hits = [h for h in _search(res, query) if h.source == source]
    assert hits, f"{source} not among the hits for {query!r}"
    hit = hits[0]
    assert wanted in hit.text and hit.page == page
    # Only text that came out of an image carries the OCR flag that citations show.
    assert hit.ocr is not (source == "mixed.pdf" and page == 1)


def test_ocr_status_counts_the_recognised_pages(ingested):
    _, outcomes, _ = ingested
    assert "recognised text on 2 of 2 scanned page(s)" in outcomes["scanned.pdf"].reason
    assert "recognised text on 1 of 1 scanned page(s)" in outcomes["mixed.pdf"].reason
    assert "recognised text on 2 of 2" in outcomes["scan.tiff"].reason


def test_a_late_row_is_found_with_its_sheet_and_merged_header(ingested):
    res, outcomes, _ = ingested
    assert outcomes["inventory.xlsx"].status == "done"
    hits = [h for h in _search(res, f"Who owns asset A-{LATE_ROW:05d} Zebulon Quartermaine?") if h.source == "inventory.xlsx"]
    assert hits
    hit = hits[0]
    assert f"Asset tag: A-{LATE_ROW:05d}; Location Building: B-{LATE_ROW % 7}; Location Room: R-{LATE_ROW}; Owner: Zebulon Quartermaine" in hit.text
    # The group repeats the header row, and its heading names the sheet and the rows it holds.
    assert hit.text.startswith("Asset tag | Location Building | Location Room | Owner\n")
    assert hit.heading.startswith("Inventory — rows ") and not hit.ocr
    first, last = (int(n.replace(",", "")) for n in hit.heading.rsplit(" ", 1)[1].split("-"))
    assert first <= LATE_ROW <= last


def test_a_big_document_is_indexed_a_part_at_a_time(ingested):
    _, outcomes, _ = ingested
    # More chunks than one part: the late-row test above found its row in a document written in parts.
    assert outcomes["inventory.xlsx"].status == "done" and outcomes["inventory.xlsx"].chunks > 2 * PART_CHUNKS


def test_a_table_over_a_limit_after_parts_were_written_keeps_no_points(ingested, tmp_path: Path):
    res, outcomes, _ = ingested
    outcome = outcomes["tickets.csv"]
    assert outcome.status == "too_large" and f"ASSISTANT_MAX_SHEET_CELLS={MAX_CELLS:,}" in outcome.reason
    # The rows before the limit make more sections (each at least one chunk) than one part holds, so
    # parts of it had been handed over, embedded and written when the limit stopped it.
    before = parse_file(_csv(tmp_path / "tickets.csv", 800), limits=Limits(max_sheet_cells=MAX_CELLS))
    assert len(before.sections) > 2 * PART_CHUNKS
    doc_id = document_id(outcome.uri)
    assert res.store.count(doc_id=doc_id) == 0
    with res.db.session() as session:
        doc = session.get(Document, doc_id)
        assert (doc.status, doc.chunk_count) == ("too_large", 0)


def test_the_job_row_shows_live_totals_while_running(ingested):
    _, outcomes, progress = ingested
    running = progress["job_rows"]
    assert running, "the job row had no totals while it ran"
    assert all(t["files_total"] == len(outcomes) for t in running)
    assert any(0 < t["files_done"] < len(outcomes) for t in running)
    assert any(t["ocr_pages"] > 0 for t in running)
    # A big file shows its chunks part by part, before it is done (no file finished in between).
    events = progress["events"]
    assert any(b["chunks"] > a["chunks"] and b["files_done"] == a["files_done"] for a, b in zip(events, events[1:]))
    assert events[-1]["chunks"] == sum(o.chunks for o in outcomes.values() if o.status == "done")


def _csv(path: Path, rows: int) -> Path:
    with path.open("w") as handle:
        handle.write("Ticket,Queue,Summary\n")
        for n in range(1, rows):
            handle.write(f"T-{n},Desk {n % 5},Printer on floor {n % 9} jams\n")
    return path


def test_rows_past_the_row_limit_are_left_out_with_a_note_in_bounded_memory(tmp_path: Path):
    path = _csv(tmp_path / "tickets.csv", 60_000)
    tracemalloc.start()
    try:
        doc = parse_file(path, limits=Limits(max_sheet_rows=20_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = "\n".join(s.text for s in doc.sections)
    assert "Ticket: T-19999" in text and "T-20000" not in text
    assert doc.notes == ["indexed the first 20,000 rows only: the file has more (limit ASSISTANT_MAX_SHEET_ROWS=20,000)"]
    # Each section repeats the header and stays near one chunk's worth of rows.
    assert all(s.text.startswith("Ticket | Queue | Summary\n") and len(s.text) < 2000 for s in doc.sections)
    assert doc.sections[-1].heading.endswith("-20,000")
    # Read as a stream: the 3.4 MB file costs a few times its kept text, not a copy per row.
    assert peak < 40 * 1024 * 1024, peak


@pytest.mark.parametrize(
    ("name", "limits", "setting"),
    [
        ("inventory.xlsx", Limits(max_sheet_cells=1000), "MAX_SHEET_CELLS"),
        ("tickets.csv", Limits(max_sheet_cells=1000), "MAX_SHEET_CELLS"),
    ],
    ids=["xlsx-cells", "csv-cells"],
)
def test_too_many_cells_is_too_large_with_the_limit_and_the_value(tmp_path: Path, name, limits, setting):
    path = tmp_path / name
    inventory_workbook(path, 600) if name.endswith(".xlsx") else _csv(path, 600)
    with pytest.raises(IngestError) as caught:
        parse_file(path, limits=limits)
    assert caught.value.status == "too_large"
    assert f"ASSISTANT_{setting}=1,000" in caught.value.message and "cell count (at least) 1,00" in caught.value.message


def test_no_ocr_engine_means_needs_ocr_with_the_reason(tmp_path: Path):
    path = tmp_path / "scan.pdf"
    path.write_bytes(scanned_pdf([EN_PAGE]))
    with pytest.raises(IngestError) as caught:
        parse_file(path, limits=Limits(ocr_engine="none"))
    assert caught.value.status == "needs_ocr" and "ASSISTANT_OCR_ENGINE=none" in caught.value.message


def test_a_page_past_its_time_limit_is_named_in_the_status():
    from ingest.formats.ocr import recognise_pages
    from ingest.formats.ocr_engines import OcrOptions

    report = recognise_pages([(1, lambda: [page_image(EN_PAGE)])], options=OcrOptions(page_timeout_s=0.01))
    assert not report.sections and report.attempted == 1
    assert report.problems == ["page 1: OCR stopped past the per-page limit of 0.01 s (ASSISTANT_OCR_PAGE_TIMEOUT_S)"]
    assert "recognised text on 0 of 1 scanned page(s); page 1: OCR stopped" in report.note()
