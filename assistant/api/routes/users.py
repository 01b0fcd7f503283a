"""Admin-only account listing (admins manage accounts; they read documents through the same ACLs)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from assistant.api.deps import AdminDep, DatabaseDep
from assistant.core.auth.accounts import list_users

router = APIRouter(prefix="/api/users", tags=["users"])


class UserPublic(BaseModel):
    name: str
    groups: list[str]
    is_admin: bool
    is_service: bool
    disabled: bool
    sso: bool


@router.get("", response_model=list[UserPublic])
async def users(_admin: AdminDep, db: DatabaseDep) -> list[UserPublic]:
    """Every account with its groups (admins only)."""
    return [UserPublic(**u.to_dict()) for u in await run_in_threadpool(list_users, db)]
