"""Bodies of the per-user compliance actions (`assistant.api.routes.compliance`)."""

from __future__ import annotations

from pydantic import BaseModel


class UserFlagsUpdate(BaseModel):
    is_auditor: bool | None = None
    legal_hold: bool | None = None
