"""Which of the product's two languages (`en`, `zh`) a text is in, from one definition of a CJK ideograph.

Every part of the product that tells Chinese from other text reads it here: the sparse index's
tokenizer (which cuts CJK runs out for jieba), question routing and the no-answer message, follow-up
detection, the LLM client's token estimate and the language recorded with each ingested document.
"""

from __future__ import annotations

import re
from typing import Literal

Language = Literal["en", "zh"]

# The CJK ideograph blocks of Unicode (code points, inclusive): Extension A, the Unified Ideographs and
# the Compatibility Ideographs. Kana, Hangul and CJK punctuation are not ideographs and are not here.
CJK_IDEOGRAPH_RANGES: tuple[tuple[int, int], ...] = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))
# Those ranges as the inside of a regular expression's character class.
_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_IDEOGRAPH_RANGES)
# One or more consecutive ideographs (the sparse tokenizer's Chinese runs).
CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
# A document is Chinese when at least this share of the letters of its sample are ideographs.
DOCUMENT_MIN_CJK_SHARE = 0.2
# Characters of a document's text that `document_language` reads.
DOCUMENT_SAMPLE_CHARS = 4000
# Text whose `cjk_share` reaches this is Chinese prose (`answer_language`): a Chinese answer quoting product
# names and commands still has most of its words in ideographs, an English one quoting a Chinese term
# almost none. On prose paragraphs of the corpus (over 80 characters, no code; 300 pages of each):
# docs-zh median 0.82, 94.3% above 0.3 (those below are lists of option names); handbook-en none above.
CHINESE_MIN_CJK_SHARE = 0.3
# Spans of an answer that are not prose: code, Markdown link targets, URLs, paths and `[n]` markers.
# Chinese question words: they say what is asked, not what about ("number" for 多少, "kind" for 怎样),
# so they are neither translated for the keyword query (`crosslingual.translate`), nor a question's
# subject that no document holds (`Retriever`'s unknown terms), nor a topic an answer must share
# (`Grounder.off_the_question`). The position words 里, 时, 后 are as empty in a question.
QUESTION_WORDS_ZH = frozenset(
    "怎样 怎么样 怎么办 多少 多久 多长 多大 几个 哪个 哪里 哪儿 什么样 为何 是否 能否 可否 里 时 后".split()
)
# Characters that ask or only join ("几" weeks, "有" in 育儿假有几周): a two-character term that holds one and
# is no dictionary word is jieba's cut across a word boundary (`crosslingual.is_segmentation_artefact`).
FUNCTION_CHARS_ZH = frozenset("几 多 哪 吗 呢 吧 么 有 是 的 了 在 时 后 里 会 要 能 就 都 还 也")
_NOT_PROSE = re.compile(
    r"```.*?```|`[^`\n]*`|\]\([^)]*\)|https?://[\x21-\x7e]+|[\w.~-]+(?:/[\w.~-]+)+|\[\d+\]", re.DOTALL | re.ASCII
)
# An alphabetic word outside the ideograph blocks (`cjk_share` counts it as one unit).
_LATIN_WORD = re.compile(f"[^\\W\\d_{_CJK_CLASS}]+")


def is_cjk(ch: str) -> bool:
    """True when the single character `ch` is a CJK ideograph."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in CJK_IDEOGRAPH_RANGES)


def count_cjk(text: str) -> int:
    """Number of CJK ideographs in `text`."""
    return sum(len(run) for run in CJK_RUN.findall(text))


def has_cjk(text: str) -> bool:
    """True when `text` contains a CJK ideograph."""
    return CJK_RUN.search(text) is not None


def question_language(text: str) -> Language:
    """`zh` when the question or query `text` holds a CJK ideograph, else `en`: a question is short,
    and one Chinese word in it means the asker reads Chinese."""
    return "zh" if has_cjk(text) else "en"


def document_language(text: str) -> Language:
    """`zh` when at least `DOCUMENT_MIN_CJK_SHARE` of the letters among the first
    `DOCUMENT_SAMPLE_CHARS` characters of `text` are CJK ideographs, else `en` (an English page
    quoting a Chinese name stays English)."""
    sample = text[:DOCUMENT_SAMPLE_CHARS]
    letters = sum(1 for ch in sample if ch.isalpha()) or 1
    return "zh" if count_cjk(sample) / letters >= DOCUMENT_MIN_CJK_SHARE else "en"


def cjk_share(text: str) -> float:
    """Share of CJK ideographs among the ideographs and alphabetic words of `text`, in [0, 1] (0.0 when
    it has neither). An English word counts once, as one ideograph does (a Chinese word is about two
    ideographs, an English one about five letters); digits, punctuation and `[n]` markers do not count.
    Answers are judged by it (`answering.language_check`): a Chinese answer quoting `TiDB` stays Chinese.

    "使用 TiDB" is 2 / 3; "Open 设置 first" is 2 / 4."""
    ideographs = count_cjk(text)
    words = len(_LATIN_WORD.findall(text))
    return ideographs / (ideographs + words) if ideographs + words else 0.0


def answer_language(text: str) -> Language | None:
    """The language an answer (or any generated prose) is written in: `zh` when its `cjk_share` reaches
    `CHINESE_MIN_CJK_SHARE` once code, links, URLs, paths and `[n]` markers are left out, `en` when it
    has words and fewer ideographs, None when it has neither (an empty answer, markers only).

    A Chinese answer naming `tiup cluster upgrade` or TiDB stays Chinese; an English one quoting 内存
    stays English. `assistant eval` judges answers with it."""
    prose = _NOT_PROSE.sub(" ", text)
    if not has_cjk(prose) and not _LATIN_WORD.search(prose):
        return None
    return "zh" if cjk_share(prose) >= CHINESE_MIN_CJK_SHARE else "en"
