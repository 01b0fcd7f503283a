"""'Ask the helpdesk': when the documents hold no answer and a helpdesk is configured
(`ASSISTANT_HELPDESK_HANDOFF`), a reader hands a conversation to the helpdesk; it becomes a ticket in
the helpdesk's ticket store, waiting for an agent (`needs_agent`), with the conversation attached."""

from __future__ import annotations

import hashlib

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from assistant.answering.store import conversation_messages
from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.schemas.handoff import HandoffPublic, HandoffSettings
from assistant.core.errors import ConflictError, InvalidRequestError
from assistant.helpdesk.store import claim_ticket, store_decision

router = APIRouter(prefix="/api", tags=["helpdesk"])
# The ticket store's client for tickets the web app hands over (API keys post under their own names).
WEB_CLIENT = "web-app"
_SUBJECT_CHARS = 500


@router.get("/handoff", response_model=HandoffSettings)
async def handoff_settings(_principal: PrincipalDep, assistant: AssistantDep) -> HandoffSettings:
    """Whether a helpdesk takes conversations the documents could not answer."""
    return HandoffSettings(enabled=assistant.resources.settings.helpdesk.handoff)


@router.post("/conversations/{conversation_id}/handoff", response_model=HandoffPublic, status_code=201)
async def hand_off(conversation_id: str, principal: PrincipalDep, assistant: AssistantDep) -> HandoffPublic:
    """Hand one of the caller's conversations to the helpdesk as a ticket for an agent (once per state
    of the conversation: asking again without new messages returns the same ticket).

    Raises:
        ConflictError: no helpdesk is configured (code `helpdesk_off`).
        NotFoundError: no such conversation, or another person's.
        InvalidRequestError: the conversation has no question yet.
    """
    if not assistant.resources.settings.helpdesk.handoff:
        raise ConflictError("no helpdesk takes conversations here (ASSISTANT_HELPDESK_HANDOFF is off)", code="helpdesk_off")
    db = assistant.resources.db

    def submit() -> HandoffPublic:
        messages = conversation_messages(db, conversation_id, user_id=principal.user_id)
        questions = [m.content for m in messages if m.role == "user"]
        if not questions:
            raise InvalidRequestError(f"conversation {conversation_id!r} has no question to hand over")
        body = "\n\n".join(f"{'Question' if m.role == 'user' else 'Assistant'}: {m.content}" for m in messages)
        subject = " ".join(questions[-1].split())[:_SUBJECT_CHARS]
        digest = hashlib.sha256("\x00".join((subject, body, principal.name)).encode("utf-8")).hexdigest()
        claim = claim_ticket(
            db, client=WEB_CLIENT, idempotency_key=f"conversation:{conversation_id}:{len(messages)}", request_hash=digest,
            fields={"subject": subject, "body": body, "requester": principal.name, "requester_known": True},
        )
        record = claim.record
        if claim.new:
            record = store_decision(db, record.id, values={
                "decision": "needs_agent", "confidence": 0.0, "reply": "",
                "reasons": ["handed over from the web app: the documents held no answer"],
                # The body quotes the conversation's answers: who may read it follows what they cited.
                "evidence": {"conversation_doc_ids": list(dict.fromkeys(
                    c["doc_id"] for m in messages for c in (m.citations or []) if isinstance(c, dict) and c.get("doc_id")
                ))},
            })
        return HandoffPublic(ticket_id=record.id, decision=record.decision or "needs_agent")

    return await run_in_threadpool(submit)
