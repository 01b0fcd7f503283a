"""The HTTP server: address, deployment, request limits, proxies and streaming."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ServerSettings(BaseModel):
    """The HTTP server: address, deployment, request limits, proxies and streaming.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    environment: Literal["development", "production"] = "development"
    max_request_bytes: int = Field(
        default=1 << 20, ge=1024, description="largest request body accepted, in bytes; beyond: 413 payload_too_large"
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="comma-separated addresses (or '*') of reverse proxies whose X-Forwarded-For names the client "
        "(uvicorn's forwarded_allow_ips); empty: none, so that nobody can pose as another address to the sign-in "
        "throttle or the audit trail. compose.yaml trusts its internal network, which only nginx reaches",
    )
    sse_heartbeat_s: float = Field(default=10.0, gt=0, description="seconds between ': ping' lines while waiting")
    sse_coalesce_ms: float = Field(default=25.0, ge=0, description="tokens arriving within this are sent in one write")
