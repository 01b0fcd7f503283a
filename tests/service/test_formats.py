"""Every file of the shared formats corpus (its MANIFEST.md, read at test time) through parse_file and the Chunker.

Each manifest row gets an expectation below: the status the file must end in and, for files that
parse, text that must come out of it. A row without an expectation (or an expectation without a
row) fails `test_every_manifest_row_has_an_expectation`, so the table and the corpus cannot drift.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from assistant.core.errors import IngestError
from assistant.core.settings import Settings
from ingest.chunking import Chunker
from ingest.decoding import decode_text
from ingest.readers import Limits, ParsedDocument, parse_file

FORMATS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "formats"
MANIFEST = FORMATS / "MANIFEST.md"
if not MANIFEST.is_file():
    pytest.skip(f"the shared formats corpus is not at {FORMATS}", allow_module_level=True)

_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([^`]+)`\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*(\*\*hostile\*\*|tricky|normal)\s*\|")
# Telltales of text decoded with the wrong code page (UTF-8 read as cp1252/Latin-1, or worse).
_MOJIBAKE = ("\ufffd", "Ã¤", "Ã¶", "Ã¼", "Ã©", "â€", "Â\xa0", "\x00")

# OCR is on by default (RapidOCR's bundled models); tesseract is the optional engine.
OCR = importlib.util.find_spec("rapidocr") is not None or shutil.which("tesseract") is not None
LIBREOFFICE = (shutil.which("soffice") or shutil.which("libreoffice")) is not None
SCANNED = "done" if OCR else "needs_ocr"
# A 16x16 fax image: OCR runs when installed, and honestly finds nothing.
SCANNED_BLANK = "empty" if OCR else "needs_ocr"
LEGACY = "done" if LIBREOFFICE else "unsupported"


@dataclass(frozen=True)
class Expect:
    """What a corpus file must give: `status` ('done' or an IngestError status), text it must contain,
    page numbers that must carry text, attachment names, and a title."""

    status: str = "done"
    contains: tuple[str, ...] = ()
    pages: tuple[int, ...] = ()
    page_count: int | None = None
    attachments: tuple[str, ...] = ()
    title: str | None = None
    absent: tuple[str, ...] = field(default=())


EXPECTED: dict[str, Expect] = {
    # PDF
    "unstructured/example-docs/pdf/layout-parser-paper-fast.pdf": Expect(contains=("LayoutParser: A Unified Toolkit", "Allen Institute for AI"), page_count=2, pages=(1, 2)),
    "unstructured/example-docs/pdf/multi-column-2p.pdf": Expect(contains=("Dense Passage Retrieval for Open-Domain Question Answering",), page_count=2),
    "py-pdf-sample-files/026-latex-multicolumn/multicolumn.pdf": Expect(contains=("Two-Column Document with Lorem Ipsum", "EU Countries Information", "Copenhagen"), page_count=3, pages=(1, 2, 3)),
    "unstructured/example-docs/pdf/embedded-images-tables.pdf": Expect(contains=("Langmuir adsorption isotherm",)),
    "unstructured/example-docs/pdf/korean-text-with-tables.pdf": Expect(contains=("적립 제외 대상", "빅포인트의 유효기간은 5년으로")),
    "unstructured/example-docs/pdf/interface-config-guide-p93.pdf": Expect(contains=("Port Cross-Connect", "pxc 1 create"), title="Interface Configuration Guide"),
    "unstructured/example-docs/language-docs/fr_olap.pdf": Expect(contains=("Résumés et interrogations de logs de requêtes OLAP", "Université François Rabelais"), page_count=12),
    "py-pdf-sample-files/009-pdflatex-geotopo/GeoTopo-komprimiert.pdf": Expect(contains=("Geometrie und Topologie", "Zwischenwertsatz"), page_count=117, pages=(1, 50, 117), title="Geometrie und Topologie"),
    "py-pdf-sample-files/025-attachment/with-attachment.pdf": Expect(contains=("Lorem ipsum dolor sit amet",), attachments=("image.png",)),
    "pypdf/resources/SF424_page2.pdf": Expect(contains=("Name of Federal Agency", "FederalAgencyName: U.S. Department of Interior, Fish and Wildlife Service")),
    "unstructured/example-docs/rotated-page-90.pdf": Expect(contains=("Hello World Test Text", "Rotated page fixture")),
    "py-pdf-sample-files/015-arabic/habibi-rotated.pdf": Expect(contains=("حَبيبي", "habibi"), page_count=4, pages=(1, 2, 3, 4)),
    # Blank pages 2 and 3 give no section (and so no empty chunk).
    "unstructured/example-docs/pdf/layout-parser-paper-with-empty-pages.pdf": Expect(contains=("LayoutParser",), page_count=4, pages=(1, 4)),
    "unstructured/example-docs/pdf/pdf-with-ocr-text.pdf": Expect(contains=("Foundation",)),
    "unstructured/example-docs/pdf/loremipsum-flat.pdf": Expect(status=SCANNED, contains=("Lorem ipsum dolor sit amet",) if OCR else ()),
    "unstructured/example-docs/pdf/single_table.pdf": Expect(status=SCANNED, contains=("64,058",) if OCR else ()),
    "unstructured/example-docs/pdf/table-multi-row-column-cells.pdf": Expect(status=SCANNED, contains=("Participants",) if OCR else ()),
    "py-pdf-sample-files/007-imagemagick-images/imagemagick-CCITTFaxDecode.pdf": Expect(status=SCANNED_BLANK),
    "unstructured/example-docs/pdf/password.pdf": Expect(status="encrypted"),
    "py-pdf-sample-files/005-libreoffice-writer-password/libreoffice-writer-password.pdf": Expect(status="encrypted"),
    "pypdf/resources/crazyones-encrypted-256.pdf": Expect(status="encrypted"),
    # Policy: an owner password (copy/print flags) does not hide the text; the ACL decides who reads it.
    "unstructured/example-docs/pdf/copy-protected.pdf": Expect(contains=("LayoutParser",), page_count=2),
    "pypdf/resources/issue-297.pdf": Expect(contains=("test example",)),
    "pypdf/resources/issue-301.pdf": Expect(page_count=1),
    "unstructured/example-docs/pdf/pdf-bad-color-space.pdf": Expect(contains=("2023 Environmental Report", "net-zero")),
    # DOCX
    "unstructured/example-docs/docx-tables.docx": Expect(contains=("Header Col 1 | Header Col 2", "Lorem ipsum | A link example", "Table with merged cells")),
    "unstructured/example-docs/tables-with-incomplete-rows.docx": Expect(contains=("rows is missing cells", "a | b | c", "Strange")),
    "unstructured/example-docs/grid_offset_error.docx": Expect(contains=("A | Merged B1-B3",)),
    # The fixture's tables hold no text at all (python-docx tests only its structure): an honest "empty".
    "python-docx/features/steps/test_files/tbl-having-tables.docx": Expect(status="empty"),
    # No styles part and no text either: opened without a crash, reported empty.
    "python-docx/features/steps/test_files/sty-having-no-styles-part.docx": Expect(status="empty"),
    "unstructured/example-docs/docx-hdrftr.docx": Expect(contains=("Main document", "First header para")),
    "unstructured/example-docs/handbook-1p.docx": Expect(contains=("The United States Trustee appoints and supervises standing trustees",)),
    "unstructured/example-docs/contains-pictures.docx": Expect(contains=("floating picture",)),
    "unstructured/example-docs/teams_chat.docx": Expect(contains=("James Bond", "OK. Yeah.")),
    "unstructured/example-docs/simple.doc": Expect(status=LEGACY),
    # PPTX
    "unstructured/example-docs/fake-power-point.pptx": Expect(contains=("Adding a Bullet Slide", "Here is some text in a text box!"), page_count=1, pages=(1,)),
    "unstructured/example-docs/fake-power-point-table.pptx": Expect(contains=("Column 1 | Column 2 | Column 3", "Tangerine | Pink | Aqua")),
    "unstructured/example-docs/science-exploration-1p.pptx": Expect(contains=("Sciences and Exploration Directorate", "Code 670: Heliophysics Science Division")),
    "python-pptx/features/steps/test_files/prs-notes.pptx": Expect(contains=("Speaker notes: Notes",)),
    "python-pptx/features/steps/test_files/cht-charts.pptx": Expect(contains=("Series 1: Category 1: 4.3",)),
    "unstructured/example-docs/fake-power-point-malformed.pptx": Expect(contains=("Problem Date Placeholder",)),
    "python-pptx/tests/test_files/missing_rels_item.pptx": Expect(contains=("Presentation Title Text",)),
    "python-pptx/tests/test_files/no-slides.pptx": Expect(status="empty"),
    "unstructured/example-docs/fake-power-point.ppt": Expect(status=LEGACY),
    # Spreadsheets: rows under their headers, sheets and sub-tables apart.
    "unstructured/example-docs/2023-half-year-analyses-by-segment.xlsx": Expect(contains=("Zone NA; Sales (a): 12553", "Nestlé Health Science", "3.4 Reconciliation")),
    "unstructured/example-docs/xlsx-subtable-cases.xlsx": Expect(contains=("a: c; b: d",)),
    "unstructured/example-docs/more-than-1k-cells.xlsx": Expect(contains=("x",)),
    "unstructured/example-docs/password_protected.xlsx": Expect(status="encrypted"),
    "unstructured/example-docs/empty.xlsx": Expect(status="empty"),
    "unstructured/example-docs/tests-example.xls": Expect(contains=("What is 2+2?", "Abbreviation: MC; Question Type: Multiple Choice")),
    "unstructured/example-docs/csv-with-long-lines.csv": Expect(contains=("SpearmanCorrelationCoefficient",)),
    "unstructured/example-docs/csv-with-escaped-commas.csv": Expect(contains=("A | A | A | A,A | A",)),
    "unstructured/example-docs/semicolon-delimited.csv": Expect(contains=("Lorem, ipsum: consectetur; dolor sit: adipiscing; amet: elit",)),
    "unstructured/example-docs/stanley-cups-utf-16.csv": Expect(contains=("Team: Maple Leafs; Location: TOR; Stanley Cups: 13",)),
    # HTML
    "unstructured/example-docs/example-10k-1p.html": Expect(contains=("Galaxy Gaming, Inc.", "Common stock | GLXZ | OTCQB marketplace")),
    "unstructured/example-docs/example-with-scripts.html": Expect(contains=("Russian Offensive Campaign Assessment",), absent=("function(", "gtag(", "{display:")),
    "unstructured/example-docs/example-steelJIS-datasheet-utf-16.html": Expect(contains=("SNB22-3 Chemical composition", "成分"), title="SNB22-3 - SteelJIS - Datasheet, Chemical composition, Standards and Properties"),
    "unstructured/example-docs/fake-html-cp1252.html": Expect(contains=("Die schöne Frau", "El niño comió paella", "15,50 €", "L'été était très chaud")),
    # Text in legacy encodings
    "iconv-lite/test/gbkFile.txt": Expect(contains=("把百度设为主页",), title="百度一下，你就知道", absent=("<div", "<script")),
    "derived/deploy-and-maintain-faq.gbk.txt": Expect(contains=("TiDB 安装部署常见问题", "软硬件要求 FAQ")),
    "unstructured/example-docs/fake-text-utf-16-le.txt": Expect(contains=("This is a test document to use for unit tests.", "Doylestown, PA 18901")),
    "unstructured/example-docs/fake-text-utf-16-be.txt": Expect(contains=("This is a test document to use for unit tests.", "Dogs are the best")),
    "unstructured/example-docs/fake-text-utf-32.txt": Expect(contains=("This is a test document to use for unit tests.",)),
    "unstructured/example-docs/umlauts-non-utf8.md": Expect(contains=("können", "äöüß")),
    "unstructured/example-docs/empty.txt": Expect(status="empty"),
    "unstructured/example-docs/fake-text-all-whitespace.txt": Expect(status="empty"),
    # RTF, ODT, EPUB
    "unstructured/example-docs/fake-doc.rtf": Expect(contains=("My First Heading", "Row 2, Cell 1"), absent=("\\par", "\\rtf")),
    "unstructured/example-docs/language-docs/eng_spa_mult.rtf": Expect(contains=("All human beings are born free", "Todos los seres humanos nacen libres", "están"), absent=("\\f0", "\\par")),
    "unstructured/example-docs/fake.odt": Expect(contains=("Lorem ipsum dolor sit amet.", "Leader | Sarah | Mark | Ryan")),
    "py-pdf-sample-files/002-trivial-libre-office-writer/source.odt": Expect(contains=("Stet clita kasd gubergren",)),
    "unstructured/example-docs/winter-sports.epub": Expect(contains=("Winter Sports in Switzerland", "E. F. Benson"), title="Winter Sports in Switzerland"),
    # E-mail
    "unstructured/example-docs/eml/fake-email-attachment.eml": Expect(contains=("Subject: Fake email with attachment", "Here's the attachments!"), attachments=("fake-attachment.txt",)),
    "unstructured/example-docs/eml/email-with-image.eml": Expect(contains=("The unstructured logo is attached to this email.",), attachments=("unstructured_logo.png",), absent=("iVBORw0KGgo",)),
    # Its two PNGs are pictures of the HTML body (cid: links), not attachments.
    "unstructured/example-docs/eml/email-no-utf8-2014-03-17.111517.eml": Expect(contains=("The password for your Google Account", "From: no-reply@accounts.google.com"), title="Google Account password changed", absent=("iVBORw0KGgo",)),
    "unstructured/example-docs/eml/fake-email-malformed-encoding.eml": Expect(contains=("This is a test email to use for unit tests.", "Violets are blue")),
    "unstructured/example-docs/eml/fake-email-utf-16-le.eml": Expect(contains=("Subject: Test Email", "Roses are red"), title="Test Email"),
    "unstructured/example-docs/eml/fake-encrypted.eml": Expect(status="encrypted"),
    "unstructured/example-docs/eml/empty.eml": Expect(status="empty"),
    "unstructured/example-docs/fake-email.msg": Expect(contains=("Subject: Test Email", "Roses are red", "mrobinson@unstructured.io"), title="Test Email"),
    # Images
    "unstructured/example-docs/img/chi_sim_image.jpeg": Expect(status=SCANNED, contains=("甘草黄酮",) if OCR else ()),
}


@dataclass(frozen=True)
class Row:
    number: int
    path: str
    format: str
    size: str
    hostile: bool


def manifest_rows() -> list[Row]:
    """The file rows of MANIFEST.md: number, repository-relative path, format, size, hostile or not."""
    rows = []
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            rows.append(Row(int(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5) == "**hostile**"))
    return rows


ROWS = manifest_rows()


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    from tests.conftest import shared_embedder

    e = shared_embedder()
    return Chunker(lambda t: e.tokenizer.encode(t, add_special_tokens=False), max_tokens=e.max_text_tokens)


def test_every_manifest_row_has_an_expectation():
    assert len(ROWS) == 80, f"MANIFEST.md rows parsed: {len(ROWS)}"
    assert sum(r.hostile for r in ROWS) == 41
    paths = {r.path for r in ROWS}
    assert sorted(paths - EXPECTED.keys()) == [], "manifest rows without an expectation"
    assert sorted(EXPECTED.keys() - paths) == [], "expectations for files not in the manifest"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.number:02d}-{Path(r.path).name}")
def test_corpus_file(row: Row, chunker: Chunker):
    expect = EXPECTED[row.path]
    path = FORMATS / row.path
    if expect.status != "done":
        with pytest.raises(IngestError) as caught:
            parse_file(path)
        assert caught.value.status == expect.status, caught.value.message
        assert path.name in caught.value.message  # the reason names the file
        return

    doc = parse_file(path)
    text = "\n".join(s.text for s in doc.sections)
    assert doc.sections and all(s.text.strip() for s in doc.sections), "blank sections"
    for bad in _MOJIBAKE:
        assert bad not in text, f"{bad!r} in the text: wrong decoding"
    for wanted in expect.contains:
        assert wanted in text, f"{wanted!r} missing; text starts {text[:300]!r}"
    for unwanted in expect.absent:
        assert unwanted not in text
    if expect.title is not None:
        assert doc.title == expect.title
    if expect.page_count is not None:
        assert doc.page_count == expect.page_count
    pages = {s.page for s in doc.sections}
    assert set(expect.pages) <= pages, f"pages with text: {sorted(p for p in pages if p)}"
    if doc.page_count:
        assert all(s.page is not None and 1 <= s.page <= doc.page_count for s in doc.sections)
    assert [name for name, _ in doc.attachments] == list(expect.attachments)
    assert all(data for _, data in doc.attachments)

    chunks = chunker.chunk(doc)
    assert chunks and all(c.text.strip() for c in chunks)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert all(chunker.count(c.embed_text) <= chunker.max_tokens for c in chunks)
    if doc.page_count:
        assert {c.page for c in chunks} <= set(range(1, doc.page_count + 1))


def test_pdf_every_page_of_a_long_document_is_indexed():
    doc = parse_file(FORMATS / "py-pdf-sample-files/009-pdflatex-geotopo/GeoTopo-komprimiert.pdf")
    assert doc.page_count == 117
    assert len({s.page for s in doc.sections}) >= 110  # a few pages of the book are blank


def test_embedded_and_attached_files_are_parseable(tmp_path: Path):
    """Attachments come back as bytes that parse_file reads like any other file."""
    doc = parse_file(FORMATS / "unstructured/example-docs/eml/fake-email-attachment.eml")
    name, data = doc.attachments[0]
    (tmp_path / name).write_bytes(data)
    inner = parse_file(tmp_path / name)
    assert "\n".join(s.text for s in inner.sections).strip()


# -- limits ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("file", "limits", "setting"),
    [
        ("unstructured/example-docs/handbook-1p.docx", Limits(max_file_size_bytes=1024), "MAX_FILE_SIZE_BYTES"),
        ("py-pdf-sample-files/009-pdflatex-geotopo/GeoTopo-komprimiert.pdf", Limits(max_pages=100), "MAX_PAGES"),
        ("unstructured/example-docs/fake-power-point.pptx", Limits(max_pages=0), "MAX_PAGES"),
        ("unstructured/example-docs/handbook-1p.docx", Limits(max_decompressed_bytes=10_000), "MAX_DECOMPRESSED_BYTES"),
        ("unstructured/example-docs/more-than-1k-cells.xlsx", Limits(max_sheet_cells=500), "MAX_SHEET_CELLS"),
        ("unstructured/example-docs/csv-with-long-lines.csv", Limits(max_sheet_cells=500), "MAX_SHEET_CELLS"),
    ],
    ids=["file-size", "pdf-pages", "slides", "unpacked-size", "xlsx-cells", "csv-cells"],
)
def test_limits_are_reported_with_the_setting(file: str, limits: Limits, setting: str):
    with pytest.raises(IngestError) as caught:
        parse_file(FORMATS / file, limits=limits)
    assert caught.value.status == "too_large"
    assert f"ASSISTANT_{setting}=" in caught.value.message


def test_zip_bomb_is_refused_before_unpacking(tmp_path: Path):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w") as member:
            for _ in range(64):
                member.write(b"\0" * (1024 * 1024))
    assert bomb.stat().st_size < 1024 * 1024
    with pytest.raises(IngestError) as caught:
        parse_file(bomb, limits=Limits(max_decompressed_bytes=32 * 1024 * 1024))
    assert caught.value.status == "too_large" and "MAX_DECOMPRESSED_BYTES" in caught.value.message


def test_limits_come_from_settings():
    limits = Limits.from_settings(Settings(_env_file=None, max_pages=3, max_file_size_bytes=10, ocr_languages="eng+chi_sim"))
    assert (limits.max_pages, limits.max_file_size_bytes, limits.ocr_languages) == (3, 10, "eng+chi_sim")


# -- generated hostile and tricky files -----------------------------------------------------------

def test_docx_nested_tables_and_headers_once(tmp_path: Path, chunker: Chunker):
    from docx import Document

    document = Document()
    document.sections[0].header.paragraphs[0].text = "ACME Confidential header"
    document.sections[0].footer.paragraphs[0].text = "Page footer text"
    document.add_heading("Leave policy", level=1)
    for i in range(30):
        document.add_paragraph(f"Paragraph {i} about annual leave and how to request it from your manager.")
    outer = document.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "Outer cell"
    inner = outer.cell(0, 1).add_table(rows=1, cols=2)
    inner.cell(0, 0).text = "Inner left"
    inner.cell(0, 1).text = "Inner right"
    path = tmp_path / "nested.docx"
    document.save(path)

    doc = parse_file(path)
    text = "\n".join(s.text for s in doc.sections)
    assert "Outer cell | Inner left | Inner right" in text
    assert text.count("ACME Confidential header") == 1
    assert [s.heading for s in doc.sections] == ["Leave policy", "Header and footer"]
    chunks = chunker.chunk(doc)
    assert sum("ACME Confidential header" in c.text for c in chunks) == 1


@pytest.mark.parametrize(
    ("source", "renamed", "wanted"),
    [
        ("unstructured/example-docs/tests-example.xls", "workbook.xlsx", "What is 2+2?"),
        ("unstructured/example-docs/handbook-1p.docx", "handbook.doc", "United States Trustee"),
        ("unstructured/example-docs/fake-power-point.pptx", "deck.ppt", "Adding a Bullet Slide"),
        ("unstructured/example-docs/example-10k-1p.html", "export.xls", "Common stock | GLXZ | OTCQB marketplace"),
        ("unstructured/example-docs/stanley-cups-utf-16.csv", "export.xls", "Team: Blues; Location: STL"),
    ],
    ids=["xls-named-xlsx", "docx-named-doc", "pptx-named-ppt", "html-named-xls", "csv-named-xls"],
)
def test_office_file_under_the_other_extension(tmp_path: Path, source: str, renamed: str, wanted: str):
    """The first bytes (OLE2, zip, markup) win over the extension: renamed Office files, web 'Excel' exports."""
    path = tmp_path / renamed
    shutil.copyfile(FORMATS / source, path)
    assert wanted in "\n".join(s.text for s in parse_file(path).sections)


def test_office_file_with_wrong_extension_or_garbage(tmp_path: Path):
    garbage = tmp_path / "broken.docx"
    garbage.write_bytes(b"PK\x03\x04 this is not really a zip archive")
    with pytest.raises(IngestError) as caught:
        parse_file(garbage)
    assert caught.value.status == "failed"
    unknown = tmp_path / "drawing.dwg"
    unknown.write_bytes(b"AC1032")
    with pytest.raises(IngestError) as caught:
        parse_file(unknown)
    assert caught.value.status == "unsupported"


SAMPLE = "Grüße aus Köln — naïve café, 15 € 价格说明：请联系管理员。"


@pytest.mark.parametrize(
    ("encoding", "sample"),
    [
        ("utf-8", SAMPLE),
        ("utf-8-sig", SAMPLE),
        ("utf-16", SAMPLE),
        ("utf-16-le", SAMPLE + " plain ASCII keeps the zero bytes in place for detection"),
        ("utf-16-be", SAMPLE + " plain ASCII keeps the zero bytes in place for detection"),
        ("utf-32", SAMPLE),
        ("gb18030", "数据库集群的部署与维护常见问题。请确认操作系统版本以及磁盘空间是否满足要求，然后重新启动服务。" * 3),
        ("gbk", "如何查看集群的运行状态？可以使用监控面板或者命令行工具查看每个节点的状态信息。" * 3),
        ("cp1252", "Der Preis beträgt 15,50 € – „schön“ und süß. El niño comió paella."),
        ("latin-1", "Die Straße ist schön, ärgerlich für Ölhändler. Überall Grüße."),
    ],
)
def test_decode_text_encodings(encoding: str, sample: str, tmp_path: Path):
    data = sample.encode(encoding)
    assert decode_text(data) == sample
    # The same bytes as a .txt file come out whole through parse_file.
    path = tmp_path / f"note-{encoding}.txt"
    path.write_bytes(data)
    doc: ParsedDocument = parse_file(path)
    assert doc.sections[0].text == sample


@pytest.mark.skipif(LIBREOFFICE, reason="LibreOffice is installed: legacy files are converted")
@pytest.mark.parametrize(("name", "modern"), [("simple.doc", ".docx"), ("fake-power-point.ppt", ".pptx")])
def test_a_legacy_file_without_libreoffice_says_what_to_do(name: str, modern: str):
    with pytest.raises(IngestError) as caught:
        parse_file(FORMATS / "unstructured/example-docs" / name)
    message = caught.value.message
    assert caught.value.status == "unsupported" and message.startswith(f"{name}: ")
    assert "LibreOffice" in message and "apt-get install --no-install-recommends libreoffice-writer-nogui" in message
    assert f"save the file as {modern}" in message


def test_undecodable_binary_is_unsupported(tmp_path: Path):
    path = tmp_path / "blob.txt"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(IngestError) as caught:
        parse_file(path)
    assert caught.value.status in ("unsupported", "failed")
