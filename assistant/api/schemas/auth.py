"""Bodies of sign-in (`assistant.api.routes.auth`): the login form, the current user, the sign-in methods."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LoginRequest(BaseModel):
    username: str = Field(min_length=1, max_length=255)
    password: str = Field(min_length=1, max_length=1024)


class MePublic(BaseModel):
    name: str
    groups: list[str]
    is_admin: bool
    is_service: bool
    auth: str = Field(description="'session' or 'api_key'")
    csrf_token: str | None = Field(description="send as X-CSRF-Token on state-changing requests (sessions only)")


class ProvidersPublic(BaseModel):
    password: bool
    oidc: bool
