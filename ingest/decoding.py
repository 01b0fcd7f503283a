"""Bytes to text in whatever encoding a file share holds (BOMs, UTF-16 without BOM, GBK, cp1252, ...)."""

from __future__ import annotations

import codecs

from charset_normalizer import from_bytes

from assistant.core.errors import IngestError

# UTF-32 first: its little-endian BOM starts with the UTF-16 one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Detectors name the common subset; decode with the superset so that rarer characters survive.
_SUPERSETS = {"gb2312": "gb18030", "gbk": "gb18030", "ascii": "utf-8", "latin_1": "cp1252", "iso8859_1": "cp1252"}
_REPLACEMENT = "\ufffd"


def decode_text(data: bytes, *, name: str = "file", declared: str | None = None) -> str:
    """Decode `data` to str, detecting the encoding.

    Order: a BOM; UTF-32/UTF-16 without BOM (told by where the zero bytes fall); strict UTF-8; the
    charset the file declares (`declared`, e.g. an HTML meta or MIME charset) when the bytes decode
    with it; then charset-normalizer's best guess. Every decode is strict, so no U+FFFD is invented.

    Args:
        data: the raw bytes.
        name: the file name, for messages.
        declared: an encoding named by the file itself, tried before guessing.

    Returns:
        The text, BOM removed.

    Raises:
        IngestError(status="unsupported"): the bytes are binary (zero bytes outside a UTF-16/32
            pattern) or not text in any detectable encoding.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                break  # a BOM-like start of binary data: fall through to detection
    wide = _wide_unicode(data)
    if wide:
        try:
            return data.decode(wide)
        except UnicodeDecodeError:
            pass
    elif b"\x00" in data[:4096]:
        raise IngestError(f"{name}: binary content (zero bytes), not text", status="unsupported")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if declared:
        try:
            return data.decode(_superset(declared))
        except (UnicodeDecodeError, LookupError):
            pass
    for encoding in _guesses(data):
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
        if _REPLACEMENT not in text:
            return text
    raise IngestError(f"{name}: the content is not text in any encoding that could be detected", status="unsupported")


def looks_binary(data: bytes) -> bool:
    """Tell binary data from text.

    Args:
        data: a sample of the file (its first few KiB).

    Returns:
        True when it has zero bytes that no UTF-16/32 pattern explains.
    """
    return b"\x00" in data and _wide_unicode(data) is None


def _guesses(data: bytes) -> list[str]:
    """charset-normalizer's candidates, best first, with Western cp1252 winning among near-ties.

    Single-byte code pages often decode the same bytes with equal "chaos"; charset-normalizer then
    picks the first it tried (cp1250 before cp1252), which turns Spanish ñ into ń.
    """
    matches = list(from_bytes(data))
    if not matches:
        return []
    floor = min(m.chaos for m in matches)
    near = [m for m in matches if m.chaos <= floor + 0.005]
    top = max(m.coherence for m in near)
    ranked = sorted(near, key=lambda m: (m.coherence < top - 0.01, m.encoding != "cp1252"))
    ordered = [_superset(m.encoding) for m in ranked] + [_superset(m.encoding) for m in matches]
    return list(dict.fromkeys(ordered))


def _superset(encoding: str) -> str:
    normal = codecs.lookup(encoding).name.replace("-", "_")
    return _SUPERSETS.get(normal, encoding)


def _wide_unicode(data: bytes) -> str | None:
    """'utf-32-le'/'utf-32-be'/'utf-16-le'/'utf-16-be' for BOM-less text that is mostly ASCII-range."""
    sample = data[:4096]
    if len(sample) < 4 or b"\x00" not in sample:
        return None
    if len(sample) % 4 == 0 or len(data) % 4 == 0:
        quads = [sample[i : i + 4] for i in range(0, len(sample) - 3, 4)]
        if quads and sum(q[1:] == b"\x00\x00\x00" or q[2:] == b"\x00\x00" and q[3] == 0 for q in quads) > 0.6 * len(quads):
            return "utf-32-le"
        if quads and sum(q[:2] == b"\x00\x00" for q in quads) > 0.9 * len(quads):
            return "utf-32-be"
    even, odd = sample[0::2], sample[1::2]
    n = min(len(even), len(odd))
    if n == 0:
        return None
    zeros_even, zeros_odd = even.count(0) / n, odd.count(0) / n
    if zeros_odd > 0.3 and zeros_even < 0.05:
        return "utf-16-le"
    if zeros_even > 0.3 and zeros_odd < 0.05:
        return "utf-16-be"
    return None
