"""Which tickets go to a webhook, and what is sent: the key's URL (if any) gets the ticket's decision."""

from __future__ import annotations

from assistant.core.db.api_keys import key_options
from assistant.core.db.session import Database
from assistant.core.principals import Principal
from assistant.helpdesk.store import DeliveryRecord, TicketRecord, queue_delivery

EVENT = "ticket.decided"


def ticket_payload(ticket: TicketRecord) -> dict:
    """The webhook body for a decided ticket: the fields `POST /api/helpdesk/tickets` returns, plus
    `event` and `idempotency_key` (so that a receiver can match its own ticket)."""
    return {
        "event": EVENT, "ticket_id": ticket.id, "external_id": ticket.external_id,
        "idempotency_key": ticket.idempotency_key, "decision": ticket.decision, "reply": ticket.reply,
        "citations": ticket.citations, "confidence": ticket.confidence, "language": ticket.language,
        "reasons": ticket.reasons, "category": ticket.category, "requester": ticket.requester,
    }


def queue_ticket_webhook(db: Database, ticket: TicketRecord, *, service: Principal) -> DeliveryRecord | None:
    """A pending delivery of `ticket` to the webhook of `service`'s key, or None when it has none.
    The caller submits it (`helpdesk.deliver_webhook`); the URL is checked against the allow-list at
    each attempt."""
    options = key_options(db, service.user_id)
    if not options.webhook_url:
        return None
    return queue_delivery(db, ticket_id=ticket.id, client=service.name, url=options.webhook_url, event=EVENT,
                          payload=ticket_payload(ticket))
