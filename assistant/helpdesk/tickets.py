"""A helpdesk ticket, from request to stored decision: idempotency, the requester's principal, the
grounded reply, its confidence and the decision `auto_reply` or `needs_agent` with its reasons."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Literal

from assistant.answering import Answerer
from assistant.answering.admission import Ticket
from assistant.answering.events import Citations, Done
from assistant.answering.request import AuditSink
from assistant.core.db.identity import requester_principal
from assistant.core.db.session import Database
from assistant.core.errors import InvalidRequestError
from assistant.core.language import answer_language, question_language
from assistant.core.principals import ANONYMOUS, Principal
from assistant.helpdesk.actions import action_request
from assistant.helpdesk.confidence import Evidence, confidence, reply_evidence
from assistant.helpdesk.store import TicketRecord, claim_ticket, release_ticket, store_decision
from assistant.retrieval import Retriever

# Where a reply quotes the thread below the latest message: "On Mon, … wrote:", "-----Original Message-----",
# "From: …" headers, or a quoted line ("> …"). Only the text above is the requester's question.
_THREAD_START = re.compile(
    r"^(?:>|On .{1,200}wrote:\s*$|-{2,}\s*Original Message\s*-{2,}|From:\s|Sent:\s|发件人[:：]|在.{1,80}写道[:：])",
    re.MULTILINE | re.IGNORECASE,
)

# Reasons that send a ticket to an agent; `unsupported_sentence` only lowers the confidence.
BLOCKING = frozenset({
    "action_requested", "requester_unknown", "no_answer_in_documents", "no_citations", "reply_cut",
    "language_mismatch", "low_confidence", "part_not_covered",
})


@dataclass(frozen=True)
class TicketRequest:
    """A ticket as the helpdesk posts it. `requester` is the person's user name or e-mail address in
    the user directory; `language` (`en` or `zh`) is detected from the text when None."""

    subject: str
    body: str
    requester: str
    language: Literal["en", "zh"] | None = None
    category: str | None = None
    external_id: str | None = None

    def fingerprint(self) -> str:
        """SHA-256 (hex) of every field: the same key with another fingerprint is another ticket."""
        canonical = json.dumps(asdict(self), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Collaborators:
    """What deciding a ticket needs from the process: SQL, the retriever and answerer (`Assistant`),
    and the auto-reply threshold in [0, 1] (`ASSISTANT_HELPDESK_AUTO_REPLY_THRESHOLD`)."""

    db: Database
    retriever: Retriever
    answerer: Answerer
    threshold: float


def latest_message(body: str) -> str:
    """The part of a ticket body above the quoted thread (replies quote what came before)."""
    match = _THREAD_START.search(body)
    return (body[: match.start()] if match else body).strip()


def ticket_question(subject: str, body: str) -> str:
    """The question asked for a ticket: its subject, then its latest message."""
    return "\n\n".join(part.strip() for part in (subject, latest_message(body)) if part.strip())


def _reason(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


async def submit_ticket(
    request: TicketRequest,
    *,
    key: Principal,
    idempotency_key: str,
    parts: Collaborators,
    admission: Ticket | None = None,
    audit: AuditSink | None = None,
) -> tuple[TicketRecord, bool]:
    """Decide `request` once per `idempotency_key` of the posting key, and store the decision.

    Args:
        key: the helpdesk's service principal (the API key's account); retrieval is done as the
            requester, limited to this principal's groups.
        idempotency_key: the `Idempotency-Key` header, else the ticket's `external_id`.
        admission: the request's model admission (`Answerer.admit`), closed here; None: admitted here.
        audit: told of the retrieval.

    Returns:
        `(ticket, created)`: `created` is False when the key named a stored ticket (no generation ran).

    Raises:
        InvalidRequestError: subject and body are both empty (400).
        ConflictError: the key names a ticket with another body, or one still being answered (409).
        OverloadedError: no model slot (429).
    """
    question = ticket_question(request.subject, request.body)
    if not question:
        raise InvalidRequestError("the ticket has neither a subject nor a body (above any quoted thread)")
    requester = await asyncio.to_thread(requester_principal, parts.db, request.requester, within=key)
    fields = dict(
        subject=request.subject, body=request.body, requester=request.requester, requester_known=requester is not None,
        category=request.category, language=request.language or question_language(question),
        external_id=request.external_id,
    )
    claim = await asyncio.to_thread(
        claim_ticket, parts.db, client=key.name, idempotency_key=idempotency_key,
        request_hash=request.fingerprint(), fields=fields,
    )
    if not claim.new:
        if admission is not None:
            admission.close()
        return claim.record, False
    try:
        values = await decide(
            question, language=fields["language"], requester=requester, key=key, parts=parts, admission=admission,
            audit=audit,
        )
    except BaseException:
        await asyncio.to_thread(release_ticket, parts.db, claim.record.id)
        raise
    record = await asyncio.to_thread(store_decision, parts.db, claim.record.id, values=values)
    return record, True


async def decide(
    question: str,
    *,
    language: str,
    requester: Principal | None,
    key: Principal,
    parts: Collaborators,
    admission: Ticket | None = None,
    audit: AuditSink | None = None,
) -> dict:
    """Answer `question` as `requester` (None: a reader of `everyone` only) and decide.

    The decision is `auto_reply` only when the reply cites documents, is not declined or cut, the
    requester is known, the ticket asks for no action a person must take, the reply is in the ticket's
    language, every question of a ticket that asks several is answered (`answering.parts`; each one
    that is not is a `part_not_covered` reason, and the draft keeps the answered ones and names it) and
    the confidence reaches `parts.threshold` (for several questions, that of the least sure answer);
    otherwise `needs_agent`. Each condition that failed is a reason, and so is the number of sentences the
    grounding check removed (never their text). A reply that found nothing keeps the closest documents the requester may read, when
    the answerer names them (`done.closest`), in `evidence.closest` for the agent.

    Returns:
        The columns to store: `decision`, `confidence`, `reply`, `citations`, `reasons`, `evidence`
        (`retrieval` scores, `grounding`, `usage`, `finish_reason`), `duration_s`.
    """
    started = time.perf_counter()
    principal = requester or ANONYMOUS
    admission = admission or parts.answerer.admit(key)
    citations: list[dict] = []
    async for event in parts.answerer.stream(question, principal=principal, ticket=admission, audit=audit):
        if isinstance(event, Citations):
            citations = event.citations
        elif isinstance(event, Done):
            done = event
    abstained = done.abstained
    grounding = done.grounding
    if grounding is None:  # a table answer, or one cached before reports were stored: checked when stored
        grounding = {"supported_share": 0.0 if abstained else 1.0, "removed": 0, "sentences": 0}
    asked = done.parts or []
    if asked:  # a ticket of several questions: each part's answer weighed against its own retrieval
        evidence, score = await _parts_confidence(asked, principal=principal, parts=parts)
    else:
        retrieval = await asyncio.to_thread(
            parts.retriever.search, question, principal=principal, top_k=parts.answerer.top_k
        )
        evidence = reply_evidence(
            retrieval, [c["chunk_id"] for c in citations], parts.answerer.abstention,
            supported_share=float(grounding.get("supported_share", 0.0)),
        )
        score = 0.0 if abstained or not citations else confidence(evidence)
    reply = done.answer
    reasons = _reasons(
        question, reply=reply, language=language, requester=requester, abstained=abstained, citations=citations,
        grounding=grounding, finish_reason=done.finish_reason, score=score, threshold=parts.threshold,
        uncovered=[p["text"] for p in asked if not p["covered"]],
    )
    auto = not any(r["code"] in BLOCKING for r in reasons)
    return {
        "decision": "auto_reply" if auto else "needs_agent",
        "confidence": score,
        "reply": reply,
        "citations": citations,
        "reasons": reasons,
        "evidence": {
            "retrieval": evidence.to_dict(), "grounding": grounding, "usage": done.usage.to_dict(),
            "finish_reason": done.finish_reason, "cached": done.cached,
            "read_as": principal.acl_tokens,
            **({"closest": done.closest} if done.closest else {}),
            **({"parts": [{k: p[k] for k in ("text", "covered", "chunk_ids")} for p in asked]} if asked else {}),
        },
        "duration_s": round(time.perf_counter() - started, 3),
        "language": language,
    }


async def _parts_confidence(asked: list[dict], *, principal: Principal, parts: Collaborators) -> tuple[Evidence, float]:
    """The confidence of a reply of several parts (`Answerer`'s `done.parts`): each answered part's
    evidence (`reply_evidence` over that part's own retrieval, the chunks its answer cites, its grounding's
    supported share) and confidence; the reply's is the lowest of them (every part must be sure), 0 when
    no part was answered. Returns `(evidence of the weakest part, confidence)`."""
    weakest: tuple[Evidence, float] | None = None
    for part in asked:
        if not part["covered"] or not part["chunk_ids"]:
            continue
        retrieval = await asyncio.to_thread(
            parts.retriever.search, part["query"], principal=principal, top_k=parts.answerer.top_k
        )
        share = float((part.get("grounding") or {}).get("supported_share", 1.0))
        evidence = reply_evidence(retrieval, part["chunk_ids"], parts.answerer.abstention, supported_share=share)
        score = confidence(evidence)
        if weakest is None or score < weakest[1]:
            weakest = (evidence, score)
    return weakest or (Evidence(0.0, None, 0.0, 0.0, 0.0, 0.0), 0.0)


def _reasons(
    question: str,
    *,
    reply: str,
    language: str,
    requester: Principal | None,
    abstained: bool,
    citations: list[dict],
    grounding: dict,
    finish_reason: str,
    score: float,
    threshold: float,
    uncovered: list[str] = (),
) -> list[dict[str, str]]:
    """Why the ticket goes to an agent (each failed condition, `BLOCKING`), how many sentences the
    grounding check removed, and a `grounded` reason when nothing blocks an auto-reply."""
    reasons = []
    action = action_request(question)
    if action is not None:
        reasons.append(_reason("action_requested", f"the ticket asks for something a person must do: {action.sentence!r}"))
    if requester is None:
        reasons.append(_reason("requester_unknown", "the requester is not in the user directory; read as 'everyone' only"))
    if abstained:
        reasons.append(_reason("no_answer_in_documents", "the documents the requester may read hold no answer"))
    elif not citations:
        reasons.append(_reason("no_citations", "the reply cites no document"))
    else:
        for part in uncovered:
            reasons.append(_reason("part_not_covered", f"the documents the requester may read do not answer {part!r}"))
    removed = int(grounding.get("removed", 0))
    if removed:  # how many, never the text: it was judged unsupported and must not reach the ticket system
        reasons.append(_reason("unsupported_sentence", f"{removed} sentence(s) of the draft removed, not supported by their sources"))
    if finish_reason == "length":
        reasons.append(_reason("reply_cut", "the reply was cut at the answer length limit"))
    written = answer_language(reply) if reply else None
    if not abstained and written is not None and written != language:
        reasons.append(_reason("language_mismatch", f"the reply is in '{written}', the ticket in '{language}'"))
    if not abstained and citations and score < threshold:
        reasons.append(_reason("low_confidence", f"confidence {score:.2f} is below the threshold {threshold:.2f}"))
    if not any(r["code"] in BLOCKING for r in reasons):
        reasons.append(_reason("grounded", f"every sentence cites a readable document; confidence {score:.2f}"))
    return reasons
