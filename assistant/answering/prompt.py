"""Prompt construction. The stable part (system prompt, rules) comes first and never varies per request,
so that vLLM's prefix cache serves it; then the numbered sources, then history, then the question."""

from __future__ import annotations

from typing import Sequence

from assistant.core.llm import ChatMessage
from assistant.retrieval import RetrievedChunk

SYSTEM_PROMPT = (
    "You are the company's internal assistant. Answer the employee's question using only the "
    "numbered sources given with it. After each fact, cite its source number in square brackets, "
    "like [1]. If two sources disagree, say so and cite both. If the sources do not contain the "
    "answer, say that you could not find it in the documents. Answer in the language of the "
    "question, briefly."
)

NO_ANSWER = {
    "en": "I could not find this in the documents you can access.",
    "zh": "在您有权访问的文档中没有找到相关内容。",
}


def format_source(n: int, chunk: RetrievedChunk) -> str:
    """One numbered source block: `[n] path (heading)` then the chunk text."""
    where = chunk.source
    if chunk.page:
        where += f", page {chunk.page}"
    if chunk.heading:
        where += f" — {chunk.heading}"
    return f"[{n}] {where}\n{chunk.text.strip()}"


def build_messages(
    question: str,
    sources: Sequence[RetrievedChunk],
    history: Sequence[ChatMessage] = (),
) -> list[ChatMessage]:
    """Chat messages: stable system prompt, earlier turns, then sources and the question."""
    blocks = "\n\n".join(format_source(i, c) for i, c in enumerate(sources, start=1))
    user = f"Sources:\n\n{blocks}\n\nQuestion: {question.strip()}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, *history, {"role": "user", "content": user}]
