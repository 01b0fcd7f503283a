"""Bodies of "ask the helpdesk" (`assistant.api.routes.handoff`)."""

from __future__ import annotations

from pydantic import BaseModel


class HandoffSettings(BaseModel):
    """Whether the page offers "ask the helpdesk"."""

    enabled: bool


class HandoffPublic(BaseModel):
    """The ticket a conversation became."""

    ticket_id: int
    decision: str
