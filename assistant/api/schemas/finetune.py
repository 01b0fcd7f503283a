"""Bodies of the adapter registry for admins (`assistant.api.routes.finetune`): refresh, promote, roll back."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class RefreshCreate(BaseModel):
    audience: str = Field(default="everyone", pattern=r"^(everyone|group:[^\s:]+)$", description="who the adapter serves")
    dry_run: bool = Field(default=False, description="build and record the dataset snapshot only")


class PromoteCreate(BaseModel):
    to: Literal["canary", "live"] | None = Field(default=None, description="default: one step up")


class RollbackCreate(BaseModel):
    audience: str = Field(default="everyone", pattern=r"^(everyone|group:[^\s:]+)$")
