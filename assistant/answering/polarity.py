"""Whether a sentence is negated, so that grounding can refuse an answer that restates its source with
the opposite meaning.

Word overlap cannot see a dropped "not": "Use a password that is the same or similar to one you use on
any other websites" shares every term with the handbook's rule, which sits under "**Do not:**". So a
sentence is negated when it holds a negation cue, or when it is a list item under a lead-in line that
is a short negation ("Do not:", "Avoid the following:", "请勿：", "不要："): handbooks write their rules as
do/don't lists. Polarity is compared only between an answer sentence and a source sentence that
restate each other (`grounding.MIN_RESTATEMENT` of each one's terms in the other); a rephrasing that
turns "never share it" into "keep it to yourself" is not such a pair and is left to the other checks.

The cues are plain word lists (English contractions included; Chinese negators without the common
words that merely start with them: 不同, 不仅, 非常, 无论, 未来 ...). This is a lexical check of one
common error of small models, not natural-language inference.
"""

from __future__ import annotations

import re

_NEGATION_EN = re.compile(
    r"\b(?:not|never|no(?!\s+(?:more|less|later|earlier|longer|fewer)\s+than)|none|nor|cannot|avoid|without)\b"
    r"|n['’]t\b",
    re.IGNORECASE,
)
_NEGATION_ZH = re.compile(
    r"不(?![同仅但过断少久论管如然久错])|没有|没|(?<![无])无(?![论缝限])|勿|禁止|严禁|避免|未(?![来])|非(?![常])|别(?![的人处名])"
)
# "Not required", "optional": a list that is allowed but not asked for ("Suggested but not required:" over
# "Also assign the PR to yourself", pull-requests.md), which is no prohibition.
_NOT_OBLIGED = re.compile(
    r"\bnot\s+(?:required|mandatory|necessary|needed|compulsory|obligatory)\b|非必[须需要]|不(?:是)?(?:必须|必需|强制)",
    re.IGNORECASE,
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)、])\s+")
_LEAD_IN = re.compile(r"[:：]\s*(?:\*\*|__)?\s*$")


def is_negated(text: str) -> bool:
    """True when `text` holds a negation cue in English or Chinese."""
    return bool(_NEGATION_EN.search(text) or _NEGATION_ZH.search(text))


def is_list_item(text: str) -> bool:
    """True for a Markdown list item (`- …`, `* …`, `1. …`, `1、…`)."""
    return bool(_LIST_ITEM.match(text))


def is_lead_in_line(line: str) -> bool:
    """True for a line that ends in a colon, Markdown emphasis aside ("**Do not:**", "步骤如下：")."""
    return bool(_LEAD_IN.search(line.strip()))


def is_negating_heading(line: str) -> bool:
    """True for a short lead-in line that negates the list under it: it ends in a colon, holds a
    negation cue, and is at most 5 words or 8 Chinese characters long ("**Do not:**", "Never do this:",
    "请勿："). A longer lead-in ("While we are not prescriptive …, we do have some ground rules:",
    "要避免该问题，需注意以下两个要点：") introduces a list of its own polarity, and so does one whose
    negation only says its items are optional ("Suggested but not required:", "非必需：")."""
    if not is_lead_in_line(line):
        return False
    bare = _NOT_OBLIGED.sub(" ", re.sub(r"[*_#>:：\s]+", " ", line)).strip()
    short = len(bare.split()) <= 5 and len(re.findall(r"[\u3400-\u9fff]", bare)) <= 8
    return short and is_negated(bare)


class ListPolarity:
    """Polarity of lines read in order: a list item inherits the negation of the lead-in line (ending
    in a colon) that opened its list; any other line ends the list.

    `polarity(line, text)` -> True when `text` (a sentence of `line`, or the line itself) is negated:
    its own cue, or its list's lead-in."""

    def __init__(self) -> None:
        self._list_negated = False
        self._line: str | None = None

    def polarity(self, line: str, text: str | None = None) -> bool:
        line = line.strip()
        if line != self._line:  # a new line: a list item keeps its list, anything else ends it
            self._line = line
            if not is_list_item(line):
                self._list_negated = is_negating_heading(line)
                return is_negated(line if text is None else text)
        return is_negated(line if text is None else text) or (is_list_item(line) and self._list_negated)


def source_statements(text: str, split) -> list[tuple[str, bool]]:
    """The sentences of a source `text` with their polarity (`ListPolarity`), in order.

    Args:
        text: a source chunk's text (Markdown).
        split: the sentence splitter (`grounding.split_sentences`).
    """
    reader = ListPolarity()
    return [
        (sentence.text, reader.polarity(line, sentence.text))
        for line in text.splitlines() if line.strip()
        for sentence in split(line)
    ]
