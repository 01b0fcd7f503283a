"""Whether a sentence is negated, and the Markdown list lines that give a list item its polarity.

Word overlap cannot see a dropped "not": "Use a password that is the same or similar to one you use on
any other websites" shares every term with the handbook's rule, which sits under "**Do not:**".
Grounding therefore shows a list item to the judge with its negating lead-in ("Do not:", "Avoid the
following:", "请勿：", "不要：": handbooks write their rules as do/don't lists), and takes a near-copy
without the judge only when its polarity is the source's (`grounding.Grounder.attribute`).

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
