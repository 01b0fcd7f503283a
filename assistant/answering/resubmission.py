"""One question sent twice into one conversation (a double click, a network retry) is stored once.

A resubmission is recognised by the request's `Idempotency-Key` (the IETF httpapi draft
"The Idempotency-Key HTTP Header Field": the same key is the same request), or, whatever its key (a
double click sends two), by the same text as the conversation's last question. What the second request gets (`start_exchange`):
- the first is answered (with the key: whenever; else: within `RESUBMIT_WINDOW_S` of its answer): its stored
  answer, replayed; nothing new is stored;
- the first is being answered now (`QuestionsInFlight`): 409 `question_in_progress`;
- the first was never answered (stopped, or its stream failed): the same stored question is answered
  again, without a second copy.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime

from assistant.core.db.models import Message, utc
from assistant.core.errors import InvalidRequestError

# Without a key, the same text asked again this soon after the first is the same request (a double
# click, a browser's retry); later it is a new question (a reader asking again on purpose).
RESUBMIT_WINDOW_S = 10.0


class QuestionsInFlight:
    """The stored questions (message IDs) this process is answering now, and the lock under which a
    request checks them and stores its question, so that two copies of one question cannot both pass.

    One per app (`app.state`): with several API processes, each knows its own; the unique key per
    conversation still keeps a keyed question stored once.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._ids: set[int] = set()

    def __contains__(self, question_id: object) -> bool:
        return question_id in self._ids

    def add(self, question_id: int) -> None:
        """Mark question `question_id` as being answered."""
        self._ids.add(question_id)

    def discard(self, question_id: int) -> None:
        """Its answer is stored, or the stream ended without one."""
        self._ids.discard(question_id)


@dataclass(frozen=True)
class Earlier:
    """The stored copy of a resubmitted question and its answer (None: not answered)."""

    question: Message
    answer: Message | None


def earlier_copy(
    messages: list[Message], *, question: str, idempotency_key: str | None, now: datetime
) -> Earlier | None:
    """The stored question that `question` resubmits, if any.

    Args:
        messages: the conversation's messages, oldest first.
        question: the text sent now.
        idempotency_key: the request's `Idempotency-Key`, or None (then, and for a key not stored yet,
            the text rule alone).
        now: the time of the request (UTC).

    Raises:
        InvalidRequestError: the key was used for another question in this conversation.
    """
    keyed = next((i for i, m in enumerate(messages) if idempotency_key and m.idempotency_key == idempotency_key), None)
    if keyed is not None:
        index = keyed
        if messages[index].content != question:
            raise InvalidRequestError(
                f"Idempotency-Key {idempotency_key!r} was already used for another question in this conversation: "
                "send a new key with each new question"
            )
        return Earlier(messages[index], _answer_after(messages, index))
    index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
    if index is None or messages[index].content.strip() != question.strip():
        return None
    answer = _answer_after(messages, index)
    if answer is not None and (now - utc(answer.created_at)).total_seconds() > RESUBMIT_WINDOW_S:
        return None  # asked again on purpose, a while after its answer
    return Earlier(messages[index], answer)


def _answer_after(messages: list[Message], index: int) -> Message | None:
    following = messages[index + 1] if index + 1 < len(messages) else None
    return following if following is not None and following.role == "assistant" else None
