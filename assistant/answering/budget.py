"""The prompt's token budget: the answer, the stable system prompt and the question first, then the
history (trimmed oldest first) and the sources share what is left, so no request is refused for length."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from assistant.core.llm import ChatMessage

# Share of the room left after answer, system prompt and question that the history may take at most;
# the sources get the rest (they carry the facts, the history only the thread).
HISTORY_SHARE = 0.5
# Room a question may take at most, as a share of the context window; a longer one is cut.
QUESTION_SHARE = 0.5


@dataclass
class Budget:
    """What goes into one prompt. `sources_tokens` is the room left for the source blocks."""

    question: str
    history: list[ChatMessage]
    sources_tokens: int


def truncate_to_tokens(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The longest prefix of `text` (cut at a character) that counts at most `max_tokens` tokens."""
    if count_tokens(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # binary search on the prefix length: token counts grow with it
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def fit_history(history: Sequence[ChatMessage], *, budget_tokens: int, count_tokens: Callable[[str], int]) -> list[ChatMessage]:
    """The newest turns of `history` whose contents fit `budget_tokens`, oldest dropped first; the kept
    part starts with a user turn (an answer without its question misleads the model)."""
    kept: list[ChatMessage] = []
    used = 0
    for message in reversed(history):
        cost = count_tokens(message["content"]) + 4  # role markers of the chat template
        if used + cost > budget_tokens:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    while kept and kept[0]["role"] != "user":
        kept.pop(0)
    return kept


def plan_budget(
    question: str,
    history: Sequence[ChatMessage],
    *,
    context_tokens: int,
    max_tokens: int,
    system_prompt: str,
    count_tokens: Callable[[str], int],
    margin_tokens: int = 64,
) -> Budget:
    """Share the context window between answer, system prompt, question, history and sources.

    Args:
        question: the user's latest message.
        history: earlier turns, oldest first.
        context_tokens: the model's context window, in its tokens (`LLM.context_tokens`).
        max_tokens: room kept for the answer, in tokens.
        system_prompt: the stable system prompt.
        count_tokens: the model's token counter (`LLM.count_tokens`).
        margin_tokens: room for the chat template and estimate error.

    Returns:
        The (possibly cut) question, the kept history and the sources' room in tokens (>= 0).
    """
    fixed = max_tokens + count_tokens(system_prompt) + margin_tokens
    question = truncate_to_tokens(question, max(int(context_tokens * QUESTION_SHARE), 1), count_tokens)
    room = max(context_tokens - fixed - count_tokens(question), 0)
    kept = fit_history(history, budget_tokens=int(room * HISTORY_SHARE), count_tokens=count_tokens)
    used = sum(count_tokens(m["content"]) + 4 for m in kept)
    return Budget(question=question, history=kept, sources_tokens=max(room - used, 0))
