"""Is an answer written in the question's language? Script detection by the share of CJK ideographs.

The question's language comes from `core.language.question_language` (the product's one question detector); an
answer is judged by the share of CJK ideographs among its ideographs and words, since a Chinese answer
may quote English names (`TiDB`, `1Password`) and an English answer may quote a Chinese term.
"""

from __future__ import annotations

from assistant.core.language import cjk_share, question_language

# A Chinese answer that quotes product names and commands still has most of its words in ideographs; an
# English answer that quotes one Chinese term has almost none. Measured on prose paragraphs of the
# corpus (over 80 characters, no code; 300 pages of each): docs-zh median 0.82, 94.3% above 0.3 (those
# below are lists of option names and commands); handbook-en 0.0, none above 0.3.
MIN_CJK_SHARE_ZH = 0.3
MAX_CJK_SHARE_EN = 0.3



def answer_lang_matches(question: str, answer: str) -> bool:
    """True when `answer` is written in the language of `question` (`zh` or `en`, `question_language`), or
    has no letters to judge by."""
    if not any(ch.isalpha() for ch in answer):
        return True  # a number, a command
    share = cjk_share(answer)
    if question_language(question) == "zh":
        return share >= MIN_CJK_SHARE_ZH
    return share <= MAX_CJK_SHARE_EN
