"""Structurally valid Markdown after sentences were taken out of an answer.

The evidence check removes unsupported sentences from the model's Markdown; what is left must still be
a document a reader's renderer shows as meant (issue 42: a Chinese answer kept an empty ```shell block
and a list with empty items and a gap in its numbers). `tidy` drops fenced code blocks left empty,
closes a block left open, drops list items left without words, and numbers each ordered list 1, 2, 3
again (CommonMark: a list's first number is its start; later numbers are not read, but readers do).
It also takes what a model's reply itself leaves unbalanced: a reply cut inside its block, a lone
fence after the last line or inside one (fresh-user trial, a table answer ending in ```). `tidy` is
applied to every final answer text (the evidence check's, the table path's, a cached one's).
"""

from __future__ import annotations

import re

# A fence line (CommonMark): a run of three or more backticks or tildes; ```x``` on one line is an
# inline span, not a fence (a backtick fence's info string holds no backtick).
_FENCE = re.compile(r"^([ \t]*)(`{3,}(?![^`\n]*`)|~{3,})")
_INLINE_FENCE = re.compile(r"`{3,}")
_ITEM = re.compile(r"^([ \t]*)(?:[-*+•](?=[ \t]|$)|(\d{1,3})(?:[.)](?=[ \t]|$)|、))[ \t]*")
# What an item may hold and still say nothing: emphasis, code ticks, punctuation, citation markers.
_NOTHING = re.compile(r"(?:[\s*_`~:：.,，。;；、!！?？()（）\-]|\[\d+(?:\s*[,，]\s*\d+)*\])*")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _without_empty_blocks(lines: list[str]) -> list[str]:
    """`lines` without fenced blocks that hold only blank lines; a block never closed is closed after
    the last line (or dropped when empty)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        closing = re.compile(rf"[ \t]*{re.escape(m.group(2))}{m.group(2)[0]}*[ \t]*")
        j = next((k for k in range(i + 1, len(lines)) if closing.fullmatch(lines[k])), None)
        body = lines[i + 1 : j if j is not None else len(lines)]
        if any(line.strip() for line in body):
            out += [lines[i], *body, lines[j] if j is not None else m.group(1) + m.group(2)]
        i = (j if j is not None else len(lines)) + 1
    return out


def _unpaired_inline(line: str) -> str:
    """`line` without its last run of three or more backticks when it has no partner in the line
    (an unmatched inline fence renders as literal backticks)."""
    runs = list(_INLINE_FENCE.finditer(line))
    if len(runs) % 2 == 0:
        return line
    before, after = line[: runs[-1].start()].rstrip(), line[runs[-1].end() :].lstrip()
    return f"{before} {after}" if before and after else before or after


def tidy(text: str) -> str:
    """`text` (Markdown) as structurally valid Markdown: balanced code fences and no empty code block
    (`_without_empty_blocks`), no list item without words (only a bullet or number, markup,
    punctuation or `[n]` markers; one with an indented continuation is kept), each ordered list
    numbered from its first number on, no unpaired inline fence, at most one blank line in a row; code
    blocks unchanged."""
    lines = _without_empty_blocks(text.rstrip().split("\n"))
    code = [False] * len(lines)
    inside = False
    for i, line in enumerate(lines):
        opens = bool(_FENCE.match(line))
        code[i] = inside or opens
        inside = inside != opens
    kept: list[int] = []
    for i, line in enumerate(lines):
        item = None if code[i] else _ITEM.match(line)
        if item and _NOTHING.fullmatch(line[item.end() :]):
            following = next((x for x in lines[i + 1 :] if x.strip()), "")
            if _indent(following) <= _indent(line) or _ITEM.match(following):
                continue
        kept.append(i)
    out: list[str] = []
    numbers: dict[int, int] = {}  # indent -> the last number of the ordered list open at that indent
    for i in kept:
        line = lines[i]
        if code[i] or not line.strip():
            out.append(line)
            continue
        line = _unpaired_inline(line)
        depth, item = _indent(line), _ITEM.match(line)
        numbers = {d: n for d, n in numbers.items() if d < depth or (d == depth and item and item.group(2))}
        if item and item.group(2):
            n = numbers[depth] + 1 if depth in numbers else int(item.group(2))
            numbers[depth] = n
            line = f"{line[: item.start(2)]}{n}{line[item.end(2) :]}"
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()
