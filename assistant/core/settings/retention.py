"""How long records are kept, and what erasing a user does to the audit trail."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class RetentionSettings(BaseModel):
    """How long records are kept, and what erasing a user does to the audit trail.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    audit_days: int = Field(
        default=365, ge=0, description="days audit rows are kept; 0 = forever (China's Cybersecurity Law asks for at least 180)"
    )
    conversations_days: int = Field(
        default=0, ge=0, description="days a conversation is kept after its last message; 0 = until its owner deletes it"
    )
    feedback_days: int = Field(default=0, ge=0, description="days ratings are kept; 0 = forever")
    uploads_days: int = Field(default=0, ge=0, description="days an uploaded file (and its chunks) is kept; 0 = forever")
    job_items_days: int = Field(default=90, ge=0, description="days finished jobs and their per-file items are kept; 0 = forever")
    interval_s: float = Field(
        default=86400.0, ge=0, description="seconds between runs of the retention job (Celery beat or in-process); 0 = never"
    )
    erasure_audit_content: Literal["redact", "keep"] = Field(
        default="redact",
        description="what erasing a user does to their audit rows: 'redact' replaces the query text (who, when, "
        "which documents stay), 'keep' leaves it",
    )
