"""Retrieval queries made from the reader's question: follow-ups rewritten into standalone questions
("and for contractors?" -> a full question), and Chinese questions translated into English
(`translate_question`).

The retriever sees one query, without the conversation; a follow-up such as "what about the second
one?" retrieves nothing useful on its own. With an LLM the follow-up is rewritten by a short prompt
(query rewriting as in Ma et al., "Query Rewriting for Retrieval-Augmented Large Language Models",
EMNLP 2023); without one, or when its output is unusable, a deterministic rule prepends the previous
user question to a follow-up that is short or starts with a pronoun or connector.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence

from assistant.core.language import count_cjk
from assistant.core.llm import LLM, ChatMessage

log = logging.getLogger(__name__)

# A follow-up of at most this many words (or twice as many CJK characters) leans on the conversation.
SHORT_FOLLOWUP_WORDS = 6
# Each earlier turn shown to the rewriter is cut to this many characters (it needs the topic only).
TURN_CHARS = 400
REWRITE_MAX_TOKENS = 64
LEADING_WORDS = {
    "it", "its", "they", "them", "their", "this", "that", "these", "those", "he", "she", "his", "her",
    "there", "and", "also", "so", "then", "but", "same", "other", "else",
}
ZH_LEADING = ("它", "他", "她", "这", "那", "还有", "那么", "并且", "而且", "另外", "同样")
_ANAPHOR_WORDS = ("it", "its", "they", "them", "their", "this", "that", "these", "those", "he", "she", "him", "her")
# Lower or title case only: "IT" is the department, not a pronoun.
_ANAPHOR_ALTERNATIVES = "|".join(w for word in _ANAPHOR_WORDS for w in (word, word.title()))
ANAPHORS = re.compile(rf"\b({_ANAPHOR_ALTERNATIVES})\b")

REWRITE_SYSTEM = (
    "Rewrite the user's last message as one standalone question that can be understood without the "
    "conversation. Keep its language. Reply with the question only."
)


TRANSLATE_SYSTEM = (
    "You are a translator. Translate the Chinese text into English. Keep names, numbers and technical "
    "terms as they are. A question stays a question: never answer it. Reply with the English translation only."
)


# Two worked examples shown before the question (few-shot prompting): without them Qwen2.5-Coder-1.5B
# answered 9 of 77 judged Chinese questions instead of translating them ("新生儿的父母可以享受多少周的全薪育儿假？"
# got a number of weeks), docs/notes/answer-grounding-investigations.md, "Chinese questions answered from
# English pages". A yes/no question and a "which" question, the two kinds it answered most; neither is a
# judged question.
TRANSLATE_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("年假可以结转到下一年吗？", "Can annual leave be carried over to the next year?"),
    ("报销差旅费需要提交哪些材料？", "Which documents must be submitted to claim travel expenses?"),
)


def translation_prompt(question: str) -> list[ChatMessage]:
    """The messages that ask the chat model for `question`'s English translation: `TRANSLATE_SYSTEM`,
    the `TRANSLATE_EXAMPLES` as earlier turns, then the question."""
    messages: list[ChatMessage] = [{"role": "system", "content": TRANSLATE_SYSTEM}]
    for chinese, english in TRANSLATE_EXAMPLES:
        messages += [{"role": "user", "content": f"Chinese: {chinese}\nEnglish:"}, {"role": "assistant", "content": english}]
    return [*messages, {"role": "user", "content": f"Chinese: {question.strip()}\nEnglish:"}]


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'-]+", text.lower())


def needs_rewrite(question: str, history: Sequence[ChatMessage]) -> bool:
    """True when `question` follows earlier user turns and looks like it depends on them: short, or
    led by a pronoun or connector, or (English) holding an anaphoric pronoun."""
    if not any(m["role"] == "user" for m in history):
        return False
    text = question.strip()
    cjk = count_cjk(text)
    if cjk:
        return cjk <= 2 * SHORT_FOLLOWUP_WORDS or text.startswith(ZH_LEADING)
    words = _words(text)
    led = bool(words) and words[0] in LEADING_WORDS
    return len(words) <= SHORT_FOLLOWUP_WORDS or led or bool(ANAPHORS.search(text))


def rules_rewrite(question: str, history: Sequence[ChatMessage]) -> str:
    """The deterministic rewrite: the previous user question, then `question`, when it needs one."""
    if not needs_rewrite(question, history):
        return question
    previous = next(m["content"] for m in reversed(history) if m["role"] == "user")
    return f"{previous.strip()} {question.strip()}"


def usable_translation(output: str, question: str) -> str | None:
    """The model's English translation if usable: one line of English of sane length, labels and
    quotes stripped; None for an empty answer, a paragraph, one mostly in Chinese, or a statement where
    the question asked (the model answered instead of translating)."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    if not lines:
        return None
    text = re.sub(r"^(translation|english)\s*[:：]\s*", "", lines[0], flags=re.I).strip(" \"'“”")
    words = re.findall(r"[A-Za-z][A-Za-z'-]*", text)
    if question.rstrip().endswith(("?", "？")) and not text.endswith("?"):
        return None  # an answer, not the question translated ("The maximum length … is 64 characters.")
    # A Chinese word the model left untranslated is kept ("after值班"), an answer in Chinese is not.
    if len(words) < 2 or count_cjk(text) > len(words) or len(text) > max(400, 6 * len(question)):
        return None
    return text


async def translate_question(question: str, *, llm: LLM, timeout_s: float = 15.0) -> str | None:
    """The chat model's English translation of a Chinese retrieval query, to be searched with it.

    Why: multilingual-e5-small ranks the Chinese chunks of a mixed index, and often the wrong English
    pages, above the English page that answers a Chinese question (recall@1 0.19 on the judged
    questions whose answer is on an English page); the question and its translation searched together
    (`Retriever.search`'s `translation`) reach 0.76, with Chinese pages ranked about as before
    (docs/notes/retrieval-investigations.md, "Chinese questions about English pages"). Query
    translation by a machine translation system is the classic approach to cross-language retrieval
    (Oard, "A comparative study of query and document translation for cross-language information
    retrieval", AMTA 1998); here the chat model translates.

    Args:
        question: the retrieval query (a standalone question), Chinese.
        llm: the chat model; asked with temperature 0 and at most `REWRITE_MAX_TOKENS` tokens.
        timeout_s: longest wait for the translation, in seconds (`ASSISTANT_QUESTION_TRANSLATION_TIMEOUT_S`):
            it delays the answer's first token by as much; about 1-1.5 s on 2 idle cores.

    Returns:
        The English translation, or None when the model failed, was too slow or answered with
        something that is not an English line (`usable_translation`): the question is then searched alone.
    """
    try:
        output = await asyncio.wait_for(
            llm.complete(translation_prompt(question), max_tokens=REWRITE_MAX_TOKENS, temperature=0.0), timeout=timeout_s
        )
    except TimeoutError:
        log.warning(
            "question translation took over %.1f s; searched without it (ASSISTANT_QUESTION_TRANSLATION_TIMEOUT_S)",
            timeout_s,
        )
        return None
    except Exception as exc:  # any failure: the question is still searched as asked
        log.warning("question translation failed (%s); searched without it", type(exc).__name__)
        return None
    translation = usable_translation(output, question)
    if translation is None:
        log.info("question translation unusable (not one English question); searched without it")
    return translation


def _clean(output: str, question: str) -> str | None:
    """The LLM's rewrite if usable: one non-empty line of sane length, quotes and labels stripped."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    if not lines:
        return None
    text = re.sub(r"^(standalone question|question|query)\s*[:：]\s*", "", lines[0], flags=re.I).strip(" \"'“”")
    if len(text) < 3 or len(text) > max(400, 3 * len(question)):
        return None
    return text


async def rewrite_query(
    question: str,
    history: Sequence[ChatMessage],
    *,
    llm: LLM | None = None,
    timeout_s: float = 10.0,
) -> str:
    """A standalone retrieval query for `question` asked after `history`.

    Args:
        question: the user's latest message.
        history: earlier turns, oldest first (`role` user/assistant).
        llm: the chat model for an LLM rewrite; None for the deterministic rule only.
        timeout_s: longest wait for the LLM's rewrite, in seconds; then the rule is used.

    Returns:
        `question` itself when there is no earlier user turn; else the LLM's rewrite, or the rule's
        when there is no LLM or its output is unusable (empty, a paragraph, an error, too slow).
    """
    if not any(m["role"] == "user" for m in history):
        return question
    if llm is None:
        return rules_rewrite(question, history)
    turns = "\n".join(
        f"{'User' if m['role'] == 'user' else 'Assistant'}: {' '.join(m['content'].split())[:TURN_CHARS]}"
        for m in history[-4:]
    )
    messages: list[ChatMessage] = [
        {"role": "system", "content": REWRITE_SYSTEM},
        {"role": "user", "content": f"Conversation:\n{turns}\n\nLast message: {question.strip()}"},
    ]
    try:
        output = await asyncio.wait_for(
            llm.complete(messages, max_tokens=REWRITE_MAX_TOKENS, temperature=0.0), timeout=timeout_s
        )
    except Exception:  # a timeout or any failure: the rule still gives a usable query
        return rules_rewrite(question, history)
    return _clean(output, question) or rules_rewrite(question, history)
