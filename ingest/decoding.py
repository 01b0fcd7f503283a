"""Bytes to text in whatever encoding a file share holds (BOMs, UTF-16 without BOM, GBK, cp1252, ...)."""

from __future__ import annotations

import codecs

from charset_normalizer import from_bytes

from assistant.core.errors import IngestError

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes, *, name: str = "file") -> str:
    """Decode `data` to str, detecting the encoding (BOM first, then charset-normalizer).

    Raises:
        IngestError(status="unsupported"): the bytes are not text in any detectable encoding.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    best = from_bytes(data).best()
    if best is None:
        raise IngestError(f"{name}: the content is not text in any encoding that could be detected", status="unsupported")
    return str(best)
