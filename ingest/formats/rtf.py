"""Rich Text Format (RTF) to plain text with striprtf, control words and hidden groups dropped."""

from __future__ import annotations

import re
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.formats.document import ParsedDocument, Section, finish

MIME = "application/rtf"
_CODEPAGE = re.compile(rb"\\ansicpg(\d+)")


def read_rtf(path: Path) -> ParsedDocument:
    """Parse an RTF document; `\\'xx` escapes are decoded with the file's `\\ansicpg` code page.

    Args:
        path: the file.

    Returns:
        One section with the text (tables come out with cells separated by '|').

    Raises:
        IngestError: `failed` (not RTF), `empty` (no text).
    """
    from striprtf.striprtf import rtf_to_text

    data = path.read_bytes()
    if not data.lstrip().startswith(b"{\\rtf"):
        raise IngestError(f"{path.name}: not an RTF document (no '{{\\rtf' header)")
    codepage = _CODEPAGE.search(data[:2048])
    encoding = f"cp{codepage.group(1).decode()}" if codepage else "cp1252"
    try:
        "".encode(encoding)
    except LookupError:
        encoding = "cp1252"
    # RTF is 7-bit by specification; latin-1 maps any stray 8-bit byte to one character losslessly.
    text = rtf_to_text(data.decode("latin-1"), encoding=encoding, errors="replace")
    text = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").splitlines())
    return finish(ParsedDocument(title=path.stem, mime=MIME, sections=[Section(text.replace("\ufffd", ""))]), name=path.name)
