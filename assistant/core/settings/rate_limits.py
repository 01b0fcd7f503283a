"""Per API key limits on /v1 and the helpdesk."""

from __future__ import annotations

from pydantic import BaseModel, Field

from assistant.core.urls import RedisUrlText


class RateLimitSettings(BaseModel):
    """Per API key limits on /v1 and the helpdesk.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    requests_per_minute: int = Field(default=0, ge=0, description="per API key on /v1 and the helpdesk; 0 = unlimited")
    tokens_per_minute: int = Field(default=0, ge=0, description="per API key, answer tokens; 0 = unlimited")
    redis_url: RedisUrlText | None = Field(
        default=None, description="Redis shared by the API processes for rate limits; default: in-process counters"
    )
