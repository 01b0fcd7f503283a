"""One answer to a question of several parts (`parts.split_question`): each part retrieved, answered and
checked on its own, then composed, a part without an answer named as not covered.

A message that asks two things used to be answered as one question: retrieval found the page of one
half, the model answered that half, and the other was dropped without a word (helpdesk trial, issue
42: a two-part ticket auto-replied with one half). Here each part goes through the single-question
path (`Answerer._events`: retrieval as the reader, abstention, generation, the evidence check) and the
composed answer holds, per part in the order asked, its checked answer with its citations, or
`NOT_COVERED` naming it. A part is covered only when its checked answer cites a source and answers the
part (`answers_part`: it holds most of the part's words, or the judge says so): sentences each supported
by their page may still answer another question. Such an answer is shown under `NOT_SURE`, which names
the part, and the part is not covered. The parts share the request's admission ticket (one slot, held across the
parts) and its audit sink (one retrieval record per part).
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from assistant.answering.admission import Ticket
from assistant.answering.citations import cited_numbers, closest_documents, make_citations
from assistant.answering.events import AnswerEvent, Citations, Done, Retrieved, Token
from assistant.answering.judge import EvidenceJudge
from assistant.answering.markdown import tidy
from assistant.answering.parts import QuestionPart
from assistant.answering.request import AuditSink, GenerationParams
from assistant.core.index import sparse
from assistant.core.language import QUESTION_WORDS_ZH, question_language
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
# A part's answer holding more than this share of the part's terms answers it without asking the judge
# (`answers_part`): for a part of two terms, both ("How long should my password be?" is not answered by a
# sentence that shares only "password" with it).
PART_TERMS_SHARE = 0.5
# How a part is named whose checked answer may not answer it (`answers_part`), before that answer.
NOT_SURE = {
    "en": "I am not sure the documents answer “{part}”. The closest they say:",
    "zh": "我不确定文档是否回答了“{part}”。最接近的内容是：",
}
_MARKER = re.compile(r"\[([\d,，\s]+)\]")
_NUMBER = re.compile(r"[\d.,]+")
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
    is kept whole; the caller tidies what is left (`markdown.tidy`: no emptied code block)."""
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
    counted together, `supported_share` weighted by each part's sentences (1.0 for a part that reported none)."""
    sentences = sum(int((r or {}).get("sentences", 0)) for r in reports)
    removed = sum(int((r or {}).get("removed", 0)) for r in reports)
    judged = [(float(r.get("supported_share", 0.0)), int(r.get("sentences", 0))) for r in reports if r]
    weight = sum(n for _, n in judged)
    share = sum(s * n for s, n in judged) / weight if weight else (min((s for s, _ in judged), default=1.0))
    return {"supported_share": round(share, 4), "removed": removed, "sentences": sentences}


def part_terms(text: str) -> set[str]:
    """The index terms of a part or an answer (`sparse.terms`: stemmed English words, jieba words of
    Chinese), question words and bare numbers left out."""
    return {t for t in sparse.terms(text) if t not in QUESTION_WORDS_ZH and not _NUMBER.fullmatch(t)}


async def answers_part(judge: EvidenceJudge | None, part: QuestionPart, answer: str) -> bool:
    """Whether a part's checked `answer` (the sentences the evidence check kept, each supported by the
    passage it cites) answers that part. Sentences each supported by their page may still answer another
    question: on the multi-part bench a desk-phone PIN and a Berlin meeting room, which no page covers,
    got answers citing unrelated pages that the evidence check kept (docs/notes/answer-grounding-
    investigations.md, "Helpdesk: tickets of several questions"), and a ticket whose other part was
    answered was auto-replied (issue 42 part 4). As the evidence check does, overlap is the fast path:
    an answer holding more than `PART_TERMS_SHARE` of the part's terms (`part_terms`) answers it; else
    the judge is asked whether it states what the part asks (`EvidenceJudge.answers`, one short prompt;
    everyday paraphrases share few words). The part is taken as written; after the part it leans on when
    it does ("… and how do I order one?": its `query`); with its statements when it has no terms of its own
    ("… What can I do?": its `question`). Without a judge, overlap alone decides. An answer without words
    answers nothing.

    Raises:
        UpstreamUnavailableError: the judge's model server cannot be reached.
    """
    said = " ".join(_MARKER.sub("", answer).split())
    if not _WORDY.search(said):
        return False
    asked = part.text
    if part.query != part.question:  # it leans on the part before it
        asked = part.query
    elif not part_terms(part.text):  # "What can I do?": the statements before it say about what
        asked = part.question
    wanted = part_terms(asked)
    if not wanted or len(wanted & part_terms(said)) > PART_TERMS_SHARE * len(wanted):
        return True
    return judge is not None and await judge.answers(asked, said)


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
    composed answer's markers; one `Token` per part with its checked answer (its markers renumbered;
    under `NOT_SURE` when it may not answer the part) or `NOT_COVERED`; `Citations`; `Done` with the composed `answer`, `abstained` (no part answered),
    `cached` False, `finish_reason` ("length" when a part was cut), `usage` (all parts), `citations`,
    `grounding` (`combined_grounding`), `parts`: `[{"text", "question", "query", "covered",
    "chunk_ids", "grounding"}]` per part in the order asked, `covered` as `answers_part` says, `chunk_ids`
    being the chunks its answer cites ([] when it has none), `closest` (those of the parts not covered,
    at most 3; None when there are none) and
    `adapter` (the last part's: the adapter of the last generation).

    The composed answer is stored in `cache` (under the whole question) when every part was answered,
    with its grounding and parts, which a hit reports again; the parts are not cached on their own.

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
    judge = EvidenceJudge(answerer.model_for(principal))
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
        mapping = {n: position[c.chunk_id] for n, c in enumerate(sources, start=1)}
        full = renumbered(done.answer, mapping) if not done.abstained else ""
        # The chunks its checked answer cites, also where its lines repeat an earlier part's (left out below).
        cited = list(dict.fromkeys(combined[n - 1].chunk_id for n in cited_numbers(full) if 1 <= n <= len(combined)))
        covered = bool(cited) and (bool(done.quoted) or await answers_part(judge, part, full))
        text = tidy(unsaid_lines(full, seen)) if cited else ""
        if cited and not covered and text:
            # Checked sentences that may answer something else: shown under a lead that says so (the judge
            # also says NO to some right answers), and the part counts as not covered.
            text = f"{NOT_SURE[lang].format(part=part.text.rstrip('?？ '))}\n\n{text}"
        if not text and not covered:
            text = NOT_COVERED[lang].format(part=part.text.rstrip("?？ "))
            closest += [c for c in done.closest or closest_documents(sources) if c not in closest]
            cited = []
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
    grounding = combined_grounding(reports)
    if cache is not None and all(p["covered"] for p in described):
        await asyncio.to_thread(
            cache.put, question, principal=principal, answer=answer, citations=citations,
            doc_ids=[c.doc_id for c in combined], finish_reason=finish, adapter=done.adapter, grounding=grounding,
            parts=described,
        )
    yield Citations(citations)
    yield Done(answer, abstained=abstained, cached=False, finish_reason=finish, usage=usage, citations=citations,
               grounding=grounding, parts=described, closest=closest[:3] or None, adapter=done.adapter)

