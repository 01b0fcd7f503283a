"""Personal data out of training rows: e-mail addresses, phone numbers, resident ID and bank card numbers
are masked by `assistant.compliance.pii` (libphonenumber and python-stdnum checks) before a row is stored."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import TypeVar

from assistant.compliance.pii import mask_pii

Row = TypeVar("Row")


def scrub_rows(rows: Iterable[Row], *, fields: tuple[str, ...] = ("question", "answer")) -> tuple[list[Row], dict[str, int]]:
    """Mask personal data in `fields` of each dataclass row.

    Args:
        rows: frozen dataclasses with the text `fields`.

    Returns:
        The rows with masked text, and how many spans of each kind were masked (`email`, `phone`, ...).
    """
    counts: Counter[str] = Counter()
    out = []
    for row in rows:
        changes = {}
        for name in fields:
            masked = mask_pii(getattr(row, name))
            counts.update(masked.counts)
            changes[name] = masked.text
        out.append(replace(row, **changes))
    return out, dict(counts)
