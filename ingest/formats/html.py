"""HTML (and XHTML) to text: scripts, styles and hidden parts dropped, tables kept as rows, split at headings."""

from __future__ import annotations

import re
from pathlib import Path

from bs4 import BeautifulSoup, NavigableString

from ingest.decoding import decode_text
from ingest.formats.document import ParsedDocument, Section, finish

MIME = "text/html"
_INVISIBLE = ["script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas"]
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)
_BLOCKS = [
    "p", "div", "br", "li", "dt", "dd", "pre", "blockquote", "section", "article", "header", "footer",
    "table", "ul", "ol", "dl", "h4", "h5", "h6", "address", "figure", "figcaption", "hr", "main", "nav",
]
_HEADING_MARK = "\x1e"
_BLANK_LINES = re.compile(r"\n\s*\n+")


def read_html(path: Path) -> ParsedDocument:
    """Parse an HTML file.

    Args:
        path: the file.

    Returns:
        One section per heading (h1-h3) with the heading's text, the page title as title.

    Raises:
        IngestError: `unsupported` (not text in a detectable encoding) or `empty` (no visible text).
    """
    data = path.read_bytes()
    return html_document(decode_html(data, name=path.name), name=path.name, fallback_title=path.stem)


def decode_html(data: bytes, *, name: str) -> str:
    """Decode HTML bytes, honouring a `<meta charset>` declaration when the bytes agree with it.

    Args:
        data: the raw file.
        name: the file name, for messages.

    Returns:
        The markup as str.

    Raises:
        IngestError(status="unsupported"): binary, or no encoding fits.
    """
    declared = _META_CHARSET.search(data[:4096])
    return decode_text(data, name=name, declared=declared.group(1).decode("ascii") if declared else None)


def html_document(markup: str, *, name: str, fallback_title: str) -> ParsedDocument:
    """Turn HTML markup (already decoded) into a document.

    Args:
        markup: the HTML text.
        name: the file name, for messages.
        fallback_title: the title when the page has no <title>.

    Returns:
        The document, sections split at h1-h3.

    Raises:
        IngestError(status="empty"): no visible text.
    """
    title, sections = html_sections(markup)
    return finish(ParsedDocument(title=title or fallback_title, mime=MIME, sections=sections), name=name)


def html_sections(markup: str) -> tuple[str, list[Section]]:
    """The title and visible text of HTML markup, one section per h1-h3 heading.

    Args:
        markup: the HTML text (a page, an e-book chapter, an e-mail body).

    Returns:
        (title, sections); the title is '' when the page has none.
    """
    soup = BeautifulSoup(markup, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_INVISIBLE):
        tag.decompose()
    for tag in soup.find_all(style=_HIDDEN_STYLE) + soup.find_all(hidden=True):
        if not tag.decomposed:
            tag.decompose()
    # Innermost rows first, so that a nested table is already one line inside its outer cell.
    for row in reversed(soup.find_all("tr")):
        cells = [c.get_text(" ", strip=True) for c in row.find_all(["td", "th"], recursive=False)]
        row.replace_with(NavigableString(" | ".join(c for c in cells if c) + "\n"))
    for heading in soup.find_all(["h1", "h2", "h3"]):
        heading.replace_with(NavigableString(f"\n{_HEADING_MARK}{heading.get_text(' ', strip=True)}\n"))
    # Block elements end lines; inline ones (b, a, span) stay inside their sentence.
    for block in soup.find_all(_BLOCKS):
        block.insert_after(NavigableString("\n"))
    body = soup.body or soup
    text = body.get_text("")
    sections: list[Section] = []
    for i, part in enumerate(text.split(_HEADING_MARK)):
        heading = ""
        if i > 0:
            heading, _, part = part.partition("\n")
            heading = heading.strip()
        lines = [" ".join(line.split()) for line in part.splitlines()]
        body_text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
        if body_text or heading:
            sections.append(Section("\n".join(p for p in (heading, body_text) if p), heading=heading))
    return title, sections
