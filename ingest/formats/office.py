"""Word documents (DOCX) to text with python-docx: headings, tables (nested too), headers and footers once."""

from __future__ import annotations

import zipfile
from pathlib import Path

from docx.oxml.ns import qn

from assistant.core.errors import IngestError
from ingest.formats.document import ParsedDocument, Section, SectionBuilder, finish, real_title

MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_HEADER_FOOTER = "Header and footer"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"


def read_docx(path: Path) -> ParsedDocument:
    """Parse a DOCX document in body order.

    Paragraphs with a Heading/Title style start a new section headed by them. Tables come out one
    row per line, cells joined with ' | ', nested tables inline in their cell; merged cells once.
    Page headers and footers repeat on every page, so they form one section of their own (each
    distinct text once) instead of being glued into the body.

    Args:
        path: the file (a zip package; the caller checked its unpacked size).

    Returns:
        The document; the title from its core properties, else the first Title paragraph, else the stem.

    Raises:
        IngestError: `failed` (unreadable package), `empty` (no text).
    """
    from docx import Document
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise IngestError(f"{path.name}: the DOCX file cannot be read ({type(exc).__name__}: {exc})") from exc
    walker = _BodyWalker(document)
    walker.walk(document.element.body)
    sections = walker.builder.sections()
    extras = _headers_and_footers(document)
    if extras:
        sections.append(Section(extras, heading=_HEADER_FOOTER))
    title = real_title(document.core_properties.title) or walker.title or path.stem
    return finish(ParsedDocument(title=title, mime=MIME, sections=sections), name=path.name)


class _BodyWalker:
    """Collects body paragraphs and tables into sections that start at headings."""

    def __init__(self, document):
        self.styles = _style_names(document)
        self.builder = SectionBuilder()
        self.title = ""

    def walk(self, element) -> None:
        for child in element.iterchildren():
            if child.tag == qn("w:p"):
                self._paragraph(child)
            elif child.tag == qn("w:tbl"):
                self.builder.add(table_text(child))
            elif child.tag in (qn("w:sdt"), qn("w:sdtContent"), qn("w:customXml"), qn("w:ins"), qn("w:smartTag")):
                self.walk(child)  # content controls and tracked insertions wrap ordinary paragraphs

    def _paragraph(self, p) -> None:
        text = paragraph_text(p)
        if not text:
            return
        style = self.styles.get(p.pPr.style if p.pPr is not None else None, "").lower()
        if style == "title" or style.startswith("heading"):
            self.builder.start(text)
            self.title = self.title or (text if style == "title" else "")
        else:
            self.builder.add(text)


def paragraph_text(p) -> str:
    """The visible text of one paragraph.

    Args:
        p: a `w:p` element (python-docx's lxml tree).

    Returns:
        Runs, hyperlinks, tabs and breaks as text, stripped; deleted (tracked) text and the VML
        fallback copy of text boxes are left out.
    """
    parts = []
    # A text box is stored twice (DrawingML choice and VML fallback); read only the choice.
    for node in p.iter(qn("w:t"), qn("w:tab"), qn("w:br"), qn("w:cr")):
        if next(node.iterancestors(_FALLBACK), None) is not None:
            continue
        if node.tag == qn("w:t"):
            parts.append(node.text or "")
        elif node.tag == qn("w:tab"):
            parts.append("\t")
        else:
            parts.append("\n")
    return "".join(parts).strip()


def table_text(tbl) -> str:
    """A `w:tbl` element as lines of ' | '-joined cells.

    Cells are read from the XML row by row (not through the layout grid), so ragged rows and
    gridBefore offsets cannot raise; a vertically merged cell's continuation is empty and skipped.

    Args:
        tbl: a `w:tbl` element.

    Returns:
        One line per non-empty row; a nested table inline in its cell, its rows joined by ' / '.
    """
    lines = []
    for tr in tbl.iterchildren(qn("w:tr")):
        cells = []
        for tc in tr.iter(qn("w:tc")):
            if tc.getparent() is not tr and tc.getparent().tag != qn("w:sdtContent"):
                continue  # a cell of a nested table: rendered inside its parent cell
            parts = []
            for child in tc.iterchildren():
                if child.tag == qn("w:p"):
                    parts.append(paragraph_text(child))
                elif child.tag == qn("w:tbl"):
                    parts.append(table_text(child).replace("\n", " / "))
            cell = " ".join(p for p in parts if p)
            if cell:
                cells.append(cell)
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _style_names(document) -> dict[str | None, str]:
    # A package without word/styles.xml still opens; it just has no heading styles to detect.
    try:
        return {s.style_id: s.name or "" for s in document.styles}
    except (KeyError, ValueError, AttributeError):
        return {}


def _headers_and_footers(document) -> str:
    seen: list[str] = []
    for section in document.sections:
        for part in (section.header, section.first_page_header, section.even_page_header,
                     section.footer, section.first_page_footer, section.even_page_footer):
            try:
                if part.is_linked_to_previous:
                    continue
                element = part._element  # python-docx exposes no public XML walk of a header
            except (KeyError, ValueError, AttributeError):
                continue
            for child in element.iterchildren():
                text = paragraph_text(child) if child.tag == qn("w:p") else table_text(child) if child.tag == qn("w:tbl") else ""
                if text and text not in seen:
                    seen.append(text)
    return "\n".join(seen)
