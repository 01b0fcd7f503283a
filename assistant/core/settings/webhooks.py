"""Delivery of webhooks to the hosts a key's URL may name."""

from __future__ import annotations

from pydantic import BaseModel, Field


class WebhookSettings(BaseModel):
    """Delivery of webhooks to the hosts a key's URL may name.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    allowed_hosts: list[str] = Field(
        default_factory=list, description="hosts (or host:port) a key's webhook URL may name; empty = no webhooks"
    )
    max_attempts: int = Field(default=8, ge=1, description="tries of one delivery before it is dead-lettered")
    backoff_s: float = Field(default=5.0, gt=0, description="seconds before the first retry; doubled each time")
    backoff_max_s: float = Field(default=600.0, gt=0, description="longest wait between two tries, in seconds")
    timeout_s: float = Field(default=10.0, gt=0, description="seconds one delivery attempt may take")
