"""Admin-only account listing (admins manage accounts; they read documents through the same ACLs)."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from assistant.api.deps import AdminDep, DatabaseDep
from assistant.auth.accounts import UserPublic, list_users

router = APIRouter(prefix="/api/users", tags=["users"])


@router.get("", response_model=list[UserPublic])
async def users(_admin: AdminDep, db: DatabaseDep) -> list[UserPublic]:
    """Every account with its groups (admins only)."""
    return await run_in_threadpool(list_users, db)
