"""Bodies of the admin pages' API (`assistant.api.routes.admin`): accounts, groups, API keys, the model in use."""

from __future__ import annotations

from pydantic import BaseModel, Field


class UserCreate(BaseModel):
    name: str = Field(min_length=1, max_length=255)
    password: str = Field(min_length=1, max_length=1024)
    groups: list[str] = Field(default_factory=list, max_length=100)
    is_admin: bool = False


class UserUpdate(BaseModel):
    disabled: bool


class PasswordReset(BaseModel):
    password: str = Field(min_length=1, max_length=1024)


class GroupPublic(BaseModel):
    name: str
    members: list[str]


class ApiKeyCreate(BaseModel):
    name: str = Field(min_length=1, max_length=255)
    groups: list[str] = Field(default_factory=list, max_length=100)


class ApiKeyPublic(BaseModel):
    name: str
    prefix: str
    principal: str
    created_at: str | None
    revoked_at: str | None
    last_used_at: str | None


class ApiKeyCreated(BaseModel):
    """A new key: `key` is shown this once and never stored."""

    name: str
    key: str
    principal: str
    groups: list[str]


class ModelPublic(BaseModel):
    """The models answering now: chat model, embedding model, and the LoRA adapters serving ("none")."""

    llm_backend: str
    llm_model: str
    embedding_model: str
    adapter: str
