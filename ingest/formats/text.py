"""Plain text and Markdown files in any common encoding (a saved web page named .txt is read as HTML)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from ingest.formats.document import ParsedDocument, Section, finish
from ingest.formats.html import decode_html, html_document

_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.S)
_FRONT_TITLE = re.compile(r"^title:\s*[\"']?(.+?)[\"']?\s*$", re.M)
_H1 = re.compile(r"^#\s+(.+)$", re.M)
_HTML_START = re.compile(r"\A\s*(<!doctype\s+html|<html[\s>])", re.I)


def read_text(path: Path) -> ParsedDocument:
    """Parse a plain-text file; one whose content starts as an HTML page is parsed as HTML.

    Args:
        path: the file.

    Returns:
        One section with the whole text (line endings normalised to LF).

    Raises:
        IngestError: `unsupported` (not text in a detectable encoding) or `empty` (blank).
    """
    data = path.read_bytes()
    text = decode_html(data, name=path.name)
    if _HTML_START.match(text[:1024]):
        return html_document(text, name=path.name, fallback_title=path.stem)
    doc = ParsedDocument(title=path.stem, mime="text/plain", sections=[Section(_lf(text))])
    return finish(doc, name=path.name)


def read_markdown(path: Path) -> ParsedDocument:
    """Parse a Markdown file: the title from its front matter or first H1, else the file name.

    Args:
        path: the file.

    Returns:
        One Markdown section without its front matter (the chunker splits it at headings).

    Raises:
        IngestError: `unsupported` (not text in a detectable encoding) or `empty` (blank).
    """
    text = _lf(decode_html(path.read_bytes(), name=path.name))
    title = ""
    front = _FRONT_MATTER.match(text)
    if front:
        m = _FRONT_TITLE.search(front.group())
        title = m.group(1) if m else ""
        text = text[front.end():]
    if not title:
        m = _H1.search(text)
        title = plain_inline(m.group(1)) if m else path.stem.replace("_", " ").replace("-", " ")
    doc = ParsedDocument(title=title, mime="text/markdown", sections=[Section(strip_link_targets(text))], markdown=True)
    return finish(doc, name=path.name)


@functools.lru_cache(maxsize=1)
def _inline_parser():
    from markdown_it import MarkdownIt

    return MarkdownIt()  # built once per process, not per file


def plain_inline(markdown: str) -> str:
    """The words of one line of inline Markdown, without its markup: `# **Jamf**` gives the title
    `Jamf`, a link its text, code its content (markdown-it-py's inline tokens)."""
    tokens = _inline_parser().parseInline(markdown)[0].children or []
    text = "".join(t.content for t in tokens if t.type in ("text", "code_inline", "html_inline"))
    return " ".join(text.split()) or markdown.strip()


# `[text](target)` and `![alt](target)`, where the target has no spaces (an optional "title" may follow).
_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\((?:<[^>\n]*>|[^)\s]*)(?:\s+\"[^\"\n]*\")?\)")


def strip_link_targets(markdown: str) -> str:
    """Keep the words of Markdown links and images, drop their URLs.

    Link targets are long runs of tokens that carry no meaning for retrieval: in the handbook a page
    of five links to vendor guides spent most of each 256-token chunk on URLs, which diluted its
    embedding and cut it into fragments. Readers follow the citation to the document itself.
    """
    return _LINK.sub(lambda m: m.group(2), markdown)


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")
