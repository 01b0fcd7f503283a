"""Uploads: a signed-in person sends files with an audience (only me, one of my groups, or everyone for
admins); each file is stored, becomes a sync job (started by task name through the dispatcher) and is
searchable by its audience once the job is done; its owner sees its state and may delete it."""

from __future__ import annotations

import shutil
import unicodedata
import uuid
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, Response, UploadFile
from starlette.concurrency import run_in_threadpool

from assistant.api.deps import AssistantDep, DispatcherDep, PrincipalDep
from assistant.api.schemas.uploads import AudienceOption
from assistant.core.db.uploads import (
    UploadPublic,
    add_upload,
    delete_upload_row,
    get_upload,
    list_uploads,
    upload_files,
)
from assistant.core.errors import ConflictError, InvalidRequestError, PermissionDeniedError
from assistant.core.jobs import JOB_TASKS
from assistant.core.principals import EVERYONE, Principal
from assistant.core.source_removal import delete_source_contents

router = APIRouter(prefix="/api/uploads", tags=["uploads"])
_COPY_BYTES = 1 << 20


def audience_options(principal: Principal) -> list[AudienceOption]:
    """The audiences `principal` may choose: itself, each of its groups, and `everyone` for admins."""
    options = [AudienceOption(value=f"user:{principal.name}", kind="me", name=principal.name)]
    options += [AudienceOption(value=f"group:{g}", kind="group", name=g) for g in sorted(principal.groups)]
    if principal.is_admin:
        options.append(AudienceOption(value=EVERYONE, kind="everyone", name=EVERYONE))
    return options


def check_audience(principal: Principal, audience: str) -> str:
    """`audience` if `principal` may give it to an upload.

    Raises:
        PermissionDeniedError: `everyone` from someone who is not an admin (code `audience_forbidden`).
        InvalidRequestError: another person, or a group the caller is not in (code `audience_invalid`).
    """
    allowed = {o.value for o in audience_options(principal)}
    if audience in allowed:
        return audience
    if audience == EVERYONE:
        raise PermissionDeniedError(
            f"only admins may upload for 'everyone'; '{principal.name}' may choose: {', '.join(sorted(allowed))}",
            code="audience_forbidden",
        )
    raise InvalidRequestError(
        f"audience {audience!r} is not one '{principal.name}' may give: {', '.join(sorted(allowed))}",
        code="audience_invalid",
    )


def safe_filename(name: str | None) -> str:
    """The last component of an uploaded file's name, without control characters or leading dots.

    Raises:
        InvalidRequestError: nothing usable is left (code `filename_invalid`).
    """
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in unicodedata.normalize("NFC", base) if unicodedata.category(ch)[0] != "C")
    base = base.strip().lstrip(".").strip()[:255]
    if not base:
        raise InvalidRequestError(f"file name {name!r} has no usable characters", code="filename_invalid")
    return base


def _store(upload: UploadFile, target: Path) -> int:
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as out:
        shutil.copyfileobj(upload.file, out, _COPY_BYTES)
    return target.stat().st_size


@router.get("/audiences", response_model=list[AudienceOption])
async def audiences(principal: PrincipalDep) -> list[AudienceOption]:
    """The audiences the caller may give an upload."""
    return audience_options(principal)


@router.post("", response_model=list[UploadPublic], status_code=202)
async def upload(
    principal: PrincipalDep,
    assistant: AssistantDep,
    dispatcher: DispatcherDep,
    files: Annotated[list[UploadFile], File(description="one or more files")],
    audience: Annotated[str, Form(description="who may read them: user:ME, group:ONE-OF-MINE, or everyone (admins)")],
) -> list[UploadPublic]:
    """Store each file and queue its ingestion readable by `audience` only; one job per file.

    Raises:
        InvalidRequestError: no files, more than `ASSISTANT_UPLOAD_MAX_FILES`, an unusable file name,
            or an audience the caller may not give.
        PermissionDeniedError: `everyone` from a non-admin, or a caller without an account.
    """
    settings = assistant.resources.settings
    if principal.user_id is None:
        raise PermissionDeniedError(f"'{principal.name}' has no account to own uploads")
    audience = check_audience(principal, audience.strip())
    if not files:
        raise InvalidRequestError("send at least one file in the 'files' field", code="upload_empty")
    if len(files) > settings.uploads.max_files:
        raise InvalidRequestError(
            f"{len(files)} files in one upload exceed ASSISTANT_UPLOAD_MAX_FILES={settings.uploads.max_files}",
            code="upload_too_many_files",
        )
    names = [safe_filename(f.filename) for f in files]
    root = settings.resolved_uploads_dir.resolve()
    created = []
    for file, name in zip(files, names):
        upload_id = str(uuid.uuid4())
        target = root / upload_id / name
        size = await run_in_threadpool(_store, file, target)
        refused = None
        if size > settings.ingest.max_file_size_bytes:  # its job fails at once, as the parser would fail it
            refused = (
                f"{name}: file size (bytes) {size:,} exceeds the limit "
                f"ASSISTANT_MAX_FILE_SIZE_BYTES={settings.ingest.max_file_size_bytes:,}"
            )
            target.unlink()
        params = {"path": str(target), "acl": {"default": [audience]}, "upload_id": upload_id}
        record = await run_in_threadpool(
            lambda: add_upload(
                assistant.resources.db, upload_id=upload_id, user_id=principal.user_id, filename=name, path=target,
                audience=audience, size_bytes=size, params=params, refused=refused,
            )
        )
        if refused is None:
            dispatcher.submit(JOB_TASKS["sync"], job_id=record.job_id)
        created.append(record)
    return created


@router.get("", response_model=list[UploadPublic])
async def my_uploads(principal: PrincipalDep, assistant: AssistantDep) -> list[UploadPublic]:
    """The caller's uploads, newest first, with the state of each one's job."""
    if principal.user_id is None:
        return []
    return await run_in_threadpool(lambda: list_uploads(assistant.resources.db, user_id=principal.user_id))


@router.get("/{upload_id}", response_model=UploadPublic)
async def one_upload(upload_id: str, principal: PrincipalDep, assistant: AssistantDep) -> UploadPublic:
    """One of the caller's uploads.

    Raises:
        NotFoundError: no such upload, or someone else's.
    """
    return await run_in_threadpool(lambda: get_upload(assistant.resources.db, upload_id, user_id=principal.user_id or -1))


@router.delete("/{upload_id}", status_code=204)
async def delete_upload(upload_id: str, principal: PrincipalDep, assistant: AssistantDep) -> Response:
    """Delete one of the caller's uploads: its chunks, its document, its stored file.

    Raises:
        NotFoundError: no such upload, or someone else's.
        ConflictError: its job is still queued or running (code `upload_busy`).
    """
    res = assistant.resources

    def remove() -> None:
        record = get_upload(res.db, upload_id, user_id=principal.user_id or -1)
        if record.status in ("queued", "running"):
            raise ConflictError(
                f"upload {upload_id!r} ({record.filename}) is still being ingested (job {record.job_id}, "
                f"{record.status}); delete it when its job has finished", code="upload_busy",
            )
        files = upload_files(res.db, upload_id)
        if files.source_id is not None:
            delete_source_contents(res.db, res.store, files.source_id, tables_dir=res.settings.tables_dir)
        shutil.rmtree(files.path.parent, ignore_errors=True)
        delete_upload_row(res.db, upload_id)

    await run_in_threadpool(remove)
    return Response(status_code=204)
