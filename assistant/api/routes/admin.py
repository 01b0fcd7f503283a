"""The admin pages' API (admins only): accounts and group membership, API keys, sources with their
last sync and file errors (and a sync now), everyone's uploads (owner, audience, size, state; a file's
name only where the admin may read it), and the model and adapter in use."""

from __future__ import annotations

from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from assistant.adapters.store import serving_adapters
from assistant.api.deps import AdminDep, AssistantDep, DatabaseDep, DispatcherDep, RowId
from assistant.api.schemas.admin import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyPublic,
    GroupPublic,
    ModelPublic,
    PasswordReset,
    UserCreate,
    UserUpdate,
)
from assistant.auth.accounts import (
    UserPublic,
    add_member,
    create_user,
    list_users,
    remove_member,
    set_disabled,
    set_password,
)
from assistant.auth.api_keys import create_api_key, list_api_keys, revoke_api_key
from assistant.core.db.jobs import JobRecord, queue_sync_job
from assistant.core.db.uploads import UploadAdminPublic, all_uploads
from assistant.core.errors import NotFoundError
from assistant.core.jobs import JOB_TASKS
from assistant.core.visibility import Visibility
from assistant.operations.store import SourceStatusPublic, source_statuses

router = APIRouter(prefix="/api/admin", tags=["admin"])


@router.get("/users", response_model=list[UserPublic])
async def users(_admin: AdminDep, db: DatabaseDep) -> list[UserPublic]:
    """Every account with its groups."""
    return await run_in_threadpool(list_users, db)


@router.post("/users", response_model=UserPublic, status_code=201)
async def add_user(body: UserCreate, _admin: AdminDep, db: DatabaseDep) -> UserPublic:
    """Create a person's account with a password and groups.

    Raises:
        ConflictError: the name is taken. InvalidRequestError: a bad name or a weak password.
    """
    return await run_in_threadpool(
        lambda: create_user(db, body.name, groups=body.groups, password=body.password, is_admin=body.is_admin)
    )


@router.patch("/users/{name}", response_model=UserPublic)
async def update_user(name: str, body: UserUpdate, _admin: AdminDep, db: DatabaseDep) -> UserPublic:
    """Disable an account (its sessions end at once, its keys stop working) or enable it again.

    Raises:
        NotFoundError: no such user.
    """
    return await run_in_threadpool(set_disabled, db, name, body.disabled)


@router.put("/users/{name}/password", status_code=204)
async def reset_password(name: str, body: PasswordReset, _admin: AdminDep, db: DatabaseDep) -> Response:
    """Set a new password for an account; its sessions end.

    Raises:
        NotFoundError: no such user. InvalidRequestError: the password breaks the policy.
    """
    await run_in_threadpool(set_password, db, name, body.password)
    return Response(status_code=204)


@router.put("/users/{name}/groups/{group}", response_model=UserPublic)
async def join_group(name: str, group: str, _admin: AdminDep, db: DatabaseDep) -> UserPublic:
    """Add an account to a group (created when missing).

    Raises:
        NotFoundError: no such user. InvalidRequestError: a bad group name.
    """
    return await run_in_threadpool(add_member, db, name, group)


@router.delete("/users/{name}/groups/{group}", response_model=UserPublic)
async def leave_group(name: str, group: str, _admin: AdminDep, db: DatabaseDep) -> UserPublic:
    """Remove an account from a group.

    Raises:
        NotFoundError: no such user, or not a member.
    """
    return await run_in_threadpool(remove_member, db, name, group)


@router.get("/groups", response_model=list[GroupPublic])
async def groups(_admin: AdminDep, db: DatabaseDep) -> list[GroupPublic]:
    """Every group that has members, with them, by name."""
    members: dict[str, list[str]] = {}
    for user in await run_in_threadpool(list_users, db):
        for group in user.groups:
            members.setdefault(group, []).append(user.name)
    return [GroupPublic(name=g, members=sorted(m)) for g, m in sorted(members.items())]


@router.get("/keys", response_model=list[ApiKeyPublic])
async def keys(_admin: AdminDep, db: DatabaseDep) -> list[ApiKeyPublic]:
    """Every API key (name, prefix, service account, dates; never the secret)."""
    return [ApiKeyPublic(**row) for row in await run_in_threadpool(list_api_keys, db)]


@router.post("/keys", response_model=ApiKeyCreated, status_code=201)
async def new_key(body: ApiKeyCreate, _admin: AdminDep, db: DatabaseDep) -> ApiKeyCreated:
    """Create an API key for the service account of the same name; the key is in this answer only.

    Raises:
        ConflictError: an unrevoked key of that name, or a person's account of that name.
    """
    created = await run_in_threadpool(lambda: create_api_key(db, body.name, groups=body.groups))
    return ApiKeyCreated(name=created.name, key=created.key, principal=created.principal, groups=list(created.groups))


@router.delete("/keys/{name}", status_code=204)
async def revoke_key(name: str, _admin: AdminDep, db: DatabaseDep) -> Response:
    """Revoke an API key; its next request is refused.

    Raises:
        NotFoundError: no unrevoked key of that name.
    """
    await run_in_threadpool(revoke_api_key, db, name)
    return Response(status_code=204)


@router.get("/sources", response_model=list[SourceStatusPublic])
async def sources(admin: AdminDep, db: DatabaseDep) -> list[SourceStatusPublic]:
    """Every source with its counts, last sync, latest job and that job's file errors. An upload's
    source names its owner and audience; its path only where the admin may read the upload."""
    return await run_in_threadpool(lambda: source_statuses(db, visibility=Visibility(db, admin)))


@router.get("/uploads", response_model=list[UploadAdminPublic])
async def uploads(admin: AdminDep, db: DatabaseDep) -> list[UploadAdminPublic]:
    """Everyone's uploads, newest first: owner, audience, size, state and chunks; the file name only
    where the admin may read the upload (a private upload's: its owner only)."""
    return await run_in_threadpool(lambda: all_uploads(db, visibility=Visibility(db, admin)))


@router.post("/sources/{source_id}/sync", response_model=JobRecord, status_code=202)
async def sync_now(source_id: RowId, _admin: AdminDep, db: DatabaseDep, dispatcher: DispatcherDep) -> JobRecord:
    """Queue a sync of a registered source now (with the ACL manifest stored with it).

    Raises:
        NotFoundError: no such source.
    """
    rows = {row.id: row for row in await run_in_threadpool(source_statuses, db)}
    if source_id not in rows:
        raise NotFoundError(f"source {source_id} not found")
    job = await run_in_threadpool(queue_sync_job, db, {"path": rows[source_id].path})
    dispatcher.submit(JOB_TASKS["sync"], job_id=job.id)
    return job


@router.get("/model", response_model=ModelPublic)
async def model(_admin: AdminDep, assistant: AssistantDep) -> ModelPublic:
    """The chat model and embedding model in use, and the LoRA adapters serving now, each as `STATUS
    NAME (AUDIENCE)` joined by "; " (a canary with the share of its audience it answers), or "none"."""
    settings = assistant.resources.settings
    name = settings.llm.openai_model if settings.llm.backend == "openai" else str(settings.llm.model_path or settings.llm.model)
    serving = await run_in_threadpool(serving_adapters, assistant.resources.db)
    adapters = "; ".join(
        f"{a.status} {a.name} ({a.audience}" + (f", {settings.finetune.canary_share:.0%} of it)" if a.status == "canary" else ")")
        for a in sorted(serving, key=lambda a: (a.audience, a.status != "live", a.name))
    )
    return ModelPublic(
        llm_backend=settings.llm.backend, llm_model=name, embedding_model=settings.embedding.model,
        adapter=adapters or "none",
    )
