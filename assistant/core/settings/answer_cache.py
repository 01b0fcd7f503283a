"""Answers kept and served again."""

from __future__ import annotations

from pydantic import BaseModel, Field

from assistant.core.urls import RedisUrlText


class AnswerCacheSettings(BaseModel):
    """Answers kept and served again.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    entries: int = Field(default=2048, ge=0, description="answers kept in memory; 0 = no answer cache")
    ttl_s: float = Field(default=3600.0, gt=0, description="seconds a cached answer lives")
    redis_url: RedisUrlText | None = Field(
        default=None, description="Redis URL shared by the API processes; default: an in-process LRU"
    )
