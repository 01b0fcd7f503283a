"""Prompt construction. The stable part (system prompt, rules) comes first and never varies per request,
so that vLLM's prefix cache serves it; then the numbered sources, then history, then the question."""

from __future__ import annotations

from collections.abc import Sequence

from assistant.answering.injection import without_instructions
from assistant.core.language import question_language
from assistant.core.llm import ChatMessage
from assistant.retrieval import RetrievedChunk

# Short numbered rules in plain words: a 0.5-1.5B instruct model follows a list better than prose. No rule
# asks the model to decline: with one ("if the sources do not answer, write only: ..."), even softened to
# "give the part they answer", Qwen2.5-Coder-1.5B declined 5 of 6 answerable English development questions
# whose sources held the answer (bench/capture_answers.py, docs/notes/answer-grounding-investigations.md,
# "Grounding fitted on Qwen2.5-Coder-1.5B's own answers"); without it, it answered all 6 and invented on the
# no-answer ones, which grounding declines (`grounding.declines`). The system prompt never varies per request
# (prefix cache); the per-request reminder of the answer's language goes at the end of the user message.
SYSTEM_PROMPT = (
    "You are the company's internal assistant. You answer an employee's question from numbered sources.\n"
    "Rules:\n"
    "1. Use only facts written in the sources. Do not add numbers, names, commands or links that are not in them.\n"
    "2. End each sentence with the number of its source in square brackets, like [1] or [2].\n"
    "3. Write in the language of the question: a Chinese question gets a Chinese answer, "
    "an English question an English answer.\n"
    "4. Be brief: at most five sentences. Do not repeat a sentence. Do not repeat these rules."
)

NO_ANSWER = {
    "en": "I could not find this in the documents you can access.",
    "zh": "在您有权访问的文档中没有找到相关内容。",
}


# Closes the user message: the rules a small model most often forgets, in the question's language.
ANSWER_REMINDER = {
    "en": "Answer in English, only from the sources, with [n] after each sentence.",
    "zh": "请只根据以上资料用中文回答，每句话后用 [n] 标注资料编号。",
}
# Added on a retry after an answer in the wrong language.
FIRMER_LANGUAGE = {
    "en": "Important: write the whole answer in English, even where the sources are in Chinese.",
    "zh": "重要：即使资料是英文的，也必须用简体中文写出全部回答。",
}


def firmer_language(messages: Sequence[ChatMessage], lang: str) -> list[ChatMessage]:
    """`messages` with `FIRMER_LANGUAGE[lang]` appended to the last (user) message."""
    *head, last = messages
    return [*head, {**last, "content": f"{last['content']}\n{FIRMER_LANGUAGE[lang]}"}]


def format_source(n: int, chunk: RetrievedChunk) -> str:
    """One numbered source block: `[n] path (heading)` then the chunk text, without any instructions
    planted in it for the assistant (`injection.without_instructions`)."""
    where = chunk.source
    if chunk.page:
        where += f", page {chunk.page}"
    if chunk.heading:
        where += f" — {chunk.heading}"
    return f"[{n}] {where}\n{without_instructions(chunk.text).strip()}"


def build_messages(
    question: str,
    sources: Sequence[RetrievedChunk],
    history: Sequence[ChatMessage] = (),
) -> list[ChatMessage]:
    """Chat messages: stable system prompt, earlier turns, then sources and the question."""
    blocks = "\n\n".join(format_source(i, c) for i, c in enumerate(sources, start=1))
    user = f"Sources:\n\n{blocks}\n\nQuestion: {question.strip()}\n\n{ANSWER_REMINDER[question_language(question)]}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, *history, {"role": "user", "content": user}]
