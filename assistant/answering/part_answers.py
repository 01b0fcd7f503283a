"""One answer to a question of several parts (`parts.split_question`): each part retrieved, answered and
checked on its own, then composed, a part without an answer named as not covered.

A message that asks two things used to be answered as one question: retrieval found the page of one
half, the model answered that half, and the other was dropped without a word (helpdesk trial, issue
42: a two-part ticket auto-replied with one half). Here each part goes through the single-question
path (`Answerer._events`: retrieval as the reader, abstention, generation, the evidence check) and the
composed answer holds, per part in the order asked, its checked answer with its citations, or
`NOT_COVERED` naming it. The parts share the request's admission ticket (one slot, held across the
parts) and its audit sink (one retrieval record per part).
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from assistant.answering.admission import Ticket
from assistant.answering.citations import cited_numbers, make_citations
from assistant.answering.events import AnswerEvent, Citations, Done, Retrieved, Token
from assistant.answering.parts import QuestionPart
from assistant.answering.request import AuditSink, GenerationParams
from assistant.core.language import question_language
from assistant.core.llm import Usage
from assistant.core.principals import Principal
from assistant.retrieval import RetrievedChunk

if TYPE_CHECKING:
    from assistant.answering.answerer import Answerer
    from assistant.answering.cache import AnswerCache

# How a part that the documents do not answer is named in the composed answer.
NOT_COVERED = {
    "en": "I found nothing about “{part}” in the documents you can access.",
    "zh": "在您有权访问的文档中没有找到关于“{part}”的内容。",
}
_MARKER = re.compile(r"\[([\d,，\s]+)\]")
_WORDY = re.compile(r"[A-Za-z\u4e00-\u9fff]")
_SENTENCE = re.compile(r"[^.!?。！？]+(?:[.!?。！？]+(?:\s*\[[\d,，\s]+\])*)?\s*")


class _SharedTicket:
    """The request's admission ticket lent to one part: `acquire` takes (or keeps) the slot, `close`
    keeps it for the next part; the request closes the ticket itself at the end."""

    def __init__(self, ticket: Ticket):
        self._ticket = ticket

    async def acquire(self) -> None:
        await self._ticket.acquire()

    def close(self) -> None:
        pass


def renumbered(text: str, mapping: dict[int, int]) -> str:
    """`text` with each `[n]` marker's numbers mapped through `mapping` (part source -> composed
    source); numbers not in it are dropped, a marker left empty goes."""

    def swap(m: re.Match) -> str:
        numbers = [int(p) for p in re.split(r"[,，\s]+", m.group(1)) if p.isdigit()]
        kept = list(dict.fromkeys(mapping[n] for n in numbers if n in mapping))
        return f"[{', '.join(map(str, kept))}]" if kept else ""

    return _MARKER.sub(swap, text)


def unsaid_lines(text: str, seen: set[str]) -> str:
    """The lines of `text` (paragraphs, list items) that say something not said before: a line whose
    sentences were all said is left out (markers, list numbers and spacing left out when comparing), as
    a part asked after the one it leans on may repeat that part's answer. A line that says anything new
    is kept whole, so that a list keeps its numbers."""
    out = []
    for line in text.split("\n"):
        keys = [" ".join(_MARKER.sub("", s).split()).lower() for s in _SENTENCE.findall(line)]
        keys = [k for k in keys if _WORDY.search(k)]
        if keys and all(k in seen for k in keys):
            continue
        seen.update(keys)
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def combined_grounding(reports: Sequence[dict | None]) -> dict:
    """One grounding report for the composed answer: sentences and removed sentences of every part
    together, `supported_share` weighted by each part's sentences (1.0 for a part that reported none)."""
    sentences = sum(int((r or {}).get("sentences", 0)) for r in reports)
    unsupported = [s for r in reports for s in ((r or {}).get("unsupported") or [])]
    judged = [(float(r.get("supported_share", 0.0)), int(r.get("sentences", 0))) for r in reports if r]
    weight = sum(n for _, n in judged)
    share = sum(s * n for s, n in judged) / weight if weight else (min((s for s, _ in judged), default=1.0))
    return {"supported_share": round(share, 4), "unsupported": unsupported, "sentences": sentences}


async def answer_parts(
    answerer: Answerer,
    question: str,
    parts: Sequence[QuestionPart],
    *,
    principal: Principal,
    ticket: Ticket | None,
    params: GenerationParams,
    audit: AuditSink | None,
    cache: AnswerCache | None,
) -> AsyncIterator[Retrieved | AnswerEvent]:
    """`Answerer._events` for a question of several `parts`: the same event types, composed.

    Events: a preliminary `Retrieved` (internal) with what each part's search finds, before any part
    is answered; a `Retrieved` after each part with every source so far, numbered as the
    composed answer's markers; one `Token` per part with its checked answer (its markers renumbered)
    or `NOT_COVERED`; `Citations`; `Done` with the composed `answer`, `abstained` (no part answered),
    `cached` False, `finish_reason` ("length" when a part was cut), `usage` (all parts), `citations`,
    `grounding` (`combined_grounding`), `parts`: `[{"text", "question", "query", "covered",
    "chunk_ids", "grounding"}]` per part in the order asked, `chunk_ids` being the chunks its answer
    cites, `closest` (those of the parts not covered, at most 3; None when there are none) and
    `adapter` (the last part's: the adapter of the last generation).

    The composed answer is stored in `cache` (under the whole question) when every part was answered;
    the parts themselves are not cached on their own.

    Args:
        answerer: answers each part (its retrieval, model, abstention and evidence check).
        question: the whole question (the cache key, and its language is the answer's).
        ticket: the request's admission, held across the parts and closed by the caller.
    """
    lang = question_language(question)
    single = copy.copy(answerer)
    single.cache = None  # the composed answer is cached, not its parts
    single.split_parts = False
    lent = _SharedTicket(ticket) if ticket is not None else None
    combined: list[RetrievedChunk] = []
    position: dict[str, int] = {}
    seen: set[str] = set()
    texts: list[str] = []
    described: list[dict] = []
    reports: list[dict | None] = []
    usage = Usage()
    finish = "stop"
    closest: list[dict] = []
    # Each part is answered in turn (a minute a part on CPU): what every part finds is shown at once.
    found: dict[str, RetrievedChunk] = {}
    for part in parts:
        retrieval = await asyncio.to_thread(
            answerer.retriever.search, part.query, principal=principal, top_k=answerer.top_k, evidence=False
        )
        found.update((c.chunk_id, c) for c in retrieval.chunks if c.chunk_id not in found)
    yield Retrieved(list(found.values()), preliminary=True, stage="reading")
    for part in parts:
        sources: list[RetrievedChunk] = []
        events = single._events(
            part.question, principal=principal, history=[], ticket=lent, params=params, audit=audit, query=part.query
        )
        async for event in events:
            if isinstance(event, Retrieved):
                sources = event.sources
            elif isinstance(event, Done):
                done = event
        for chunk in sources:
            if chunk.chunk_id not in position:
                position[chunk.chunk_id] = len(combined) + 1
                combined.append(chunk)
        yield Retrieved(list(combined))
        covered = not done.abstained
        mapping = {n: position[c.chunk_id] for n, c in enumerate(sources, start=1)}
        text = unsaid_lines(renumbered(done.answer, mapping), seen) if covered else ""
        if not covered:
            text = NOT_COVERED[lang].format(part=part.text.rstrip("?？ "))
            closest += [c for c in done.closest or [] if c not in closest]
        cited = [combined[n - 1].chunk_id for n in cited_numbers(text) if 1 <= n <= len(combined)]
        if text:
            yield Token(("\n\n" if texts else "") + text)
            texts.append(text)
        described.append({"text": part.text, "question": part.question, "query": part.query, "covered": covered,
                          "chunk_ids": cited,
                          "grounding": done.grounding})
        reports.append(done.grounding)
        usage = Usage(usage.prompt_tokens + done.usage.prompt_tokens, usage.completion_tokens + done.usage.completion_tokens)
        if done.finish_reason == "length":
            finish = "length"
    answer = "\n\n".join(texts)
    citations = [c.to_dict() for c in make_citations(answer, combined)]
    abstained = not any(p["covered"] for p in described)
    if cache is not None and all(p["covered"] for p in described):
        await asyncio.to_thread(
            cache.put, question, principal=principal, answer=answer, citations=citations,
            doc_ids=[c.doc_id for c in combined], finish_reason=finish, adapter=done.adapter,
        )
    yield Citations(citations)
    yield Done(answer, abstained=abstained, cached=False, finish_reason=finish, usage=usage, citations=citations,
               grounding=combined_grounding(reports), parts=described, closest=closest[:3] or None,
               adapter=done.adapter)

