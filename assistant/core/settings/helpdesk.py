"""The helpdesk: automatic replies, resolutions, the hand-over from the web app."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class HelpdeskSettings(BaseModel):
    """The helpdesk: automatic replies, resolutions, the hand-over from the web app.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    auto_reply_threshold: float = Field(
        default=0.5, ge=0.0, le=1.0, description="a ticket is auto-replied when its confidence reaches this (docs/helpdesk.md)"
    )
    resolutions_dir: Path | None = Field(
        default=None, description="where resolved tickets are written as documents; default: DATA_DIR/helpdesk-resolutions"
    )
    handoff: bool = Field(
        default=False,
        description="offer 'ask the helpdesk' when the documents hold no answer: the conversation becomes a ticket",
    )
