"""Finds and masks personal data in text: e-mail addresses, phone numbers, Chinese resident ID and bank card numbers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import phonenumbers
from stdnum import luhn
from stdnum.cn import ric

from assistant.core.pii_kinds import PII_KINDS, PiiKind

# What each masked span is replaced with: a bracketed word that neither the embedder nor the sparse
# index can turn back into the original, and that a reader of a citation understands.
PII_PLACEHOLDERS: dict[PiiKind, str] = {
    "email": "[EMAIL]",
    "phone": "[PHONE]",
    "cn_resident_id": "[ID_NUMBER]",
    "bank_card": "[BANK_CARD]",
}

# RFC 5322's dot-atom local part and a domain with a letters-only top level, bounded so that
# neighbouring CJK text or punctuation is not swallowed. A regular expression is what detection in
# running text needs (validators such as email-validator check one whole string, they do not find).
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9\-])"
)
# 18 characters (GB 11643-1999): 17 digits and a check character, whole or grouped 6-8-4.
_CN_RESIDENT_ID = re.compile(r"(?<![0-9A-Za-z])(?:\d{17}[\dXx]|\d{6}[ \-]\d{8}[ \-]\d{3}[\dXx])(?![0-9A-Za-z])")
# 13 to 19 digits, whole or in groups of 4 (the last group 1 to 4) separated by one space or hyphen.
_CARD = re.compile(r"(?<![0-9A-Za-z])(?:\d{13,19}|\d{4}(?:[ \-]\d{4}){2,3}(?:[ \-]\d{1,4})?)(?![0-9A-Za-z])")


@dataclass(frozen=True)
class PiiSpan:
    """One finding: `text[start:end]` is personal data of `kind` (offsets in characters)."""

    kind: PiiKind
    start: int
    end: int


@dataclass(frozen=True)
class PiiMaskResult:
    """The masked text and how many spans of each kind were replaced (every asked-for kind, zeros included)."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """All masked spans, of every kind."""
        return sum(self.counts.values())


def _emails(text: str) -> Iterator[PiiSpan]:
    for m in _EMAIL.finditer(text):
        yield PiiSpan("email", m.start(), m.end())


def _resident_ids(text: str) -> Iterator[PiiSpan]:
    for m in _CN_RESIDENT_ID.finditer(text):
        # python-stdnum checks the region code's form, the birth date and the ISO 7064 MOD 11-2 check.
        if ric.is_valid(re.sub(r"[ \-]", "", m.group()).upper()):
            yield PiiSpan("cn_resident_id", m.start(), m.end())


def _bank_cards(text: str) -> Iterator[PiiSpan]:
    for m in _CARD.finditer(text):
        number = re.sub(r"[ \-]", "", m.group())
        if not 13 <= len(number) <= 19:
            continue
        # Cards carry a Luhn check digit (ISO/IEC 7812); China UnionPay's 62-prefixed debit cards of
        # 16 to 19 digits do not always, so those count by their issuer prefix alone.
        if luhn.is_valid(number) or (number.startswith("62") and len(number) >= 16):
            yield PiiSpan("bank_card", m.start(), m.end())


def _phones(text: str, region: str) -> Iterator[PiiSpan]:
    # libphonenumber's matcher at its VALID leniency: the number must be a real, assigned-range number
    # for its country (numbers without a + prefix are read as `region`'s), which keeps dates, years
    # and amounts out.
    for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
        yield PiiSpan("phone", m.start, m.end)


def find_pii(text: str, *, kinds: Iterable[str] = PII_KINDS, region: str = "CN") -> list[PiiSpan]:
    """Find personal data in `text`.

    Args:
        text: any text (Chinese, English or mixed).
        kinds: which of `PII_KINDS` to look for.
        region: ISO 3166 country code whose national format numbers without a `+` prefix are read
            in (`CN`: 138 1234 5678, 010-6234 5678).

    Returns:
        Non-overlapping spans sorted by start; where findings overlap, the kind earlier in
        `PII_KINDS` wins (an e-mail over a phone, a resident ID over a card).

    Raises:
        ValueError: a kind that is not one of `PII_KINDS`.
    """
    wanted = list(kinds)
    unknown = sorted(set(wanted) - set(PII_KINDS))
    if unknown:
        raise ValueError(f"PII kind {unknown[0]!r} is not one of {', '.join(PII_KINDS)}")
    detectors = {
        "email": lambda: _emails(text),
        "cn_resident_id": lambda: _resident_ids(text),
        "bank_card": lambda: _bank_cards(text),
        "phone": lambda: _phones(text, region),
    }
    taken: list[PiiSpan] = []
    for kind in PII_KINDS:
        if kind not in wanted:
            continue
        for span in detectors[kind]():
            if all(span.end <= t.start or span.start >= t.end for t in taken):
                taken.append(span)
    return sorted(taken, key=lambda s: s.start)


def mask_pii(text: str, *, kinds: Iterable[str] = PII_KINDS, region: str = "CN") -> PiiMaskResult:
    """Replace personal data in `text` with placeholders (`PII_PLACEHOLDERS`: `[EMAIL]`, `[PHONE]`,
    `[ID_NUMBER]`, `[BANK_CARD]`).

    Args:
        text: any text.
        kinds: which of `PII_KINDS` to mask (default: all).
        region: see `find_pii`.

    Returns:
        `PiiMaskResult` with the masked text and the count of replaced spans per asked-for kind.

    Raises:
        ValueError: a kind that is not one of `PII_KINDS`.
    """
    wanted = list(kinds)
    spans = find_pii(text, kinds=wanted, region=region)
    counts = {k: 0 for k in PII_KINDS if k in wanted}
    parts: list[str] = []
    pos = 0
    for span in spans:
        parts.append(text[pos : span.start])
        parts.append(PII_PLACEHOLDERS[span.kind])
        counts[span.kind] += 1
        pos = span.end
    parts.append(text[pos:])
    return PiiMaskResult(text="".join(parts), counts=counts)
