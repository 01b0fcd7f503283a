"""The audit trail (admins and auditors), and per-user compliance actions (admins): unlock, roles and
legal hold, export, erasure, and a retention run on demand."""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from assistant.api.audit_origin import request_id, request_origin
from assistant.api.deps import MAX_ROW_ID, AdminDep, AssistantDep, DatabaseDep, get_principal
from assistant.api.schemas.compliance import UserFlagsUpdate
from assistant.auth.accounts import UserPublic, set_flags, unlock_account
from assistant.compliance.audit import AuditQuery, list_events, record_event
from assistant.compliance.audit_chain import verify_chain
from assistant.compliance.erasure import erase_user, export_user
from assistant.compliance.retention import apply_retention
from assistant.core.errors import PermissionDeniedError
from assistant.core.principals import Principal
from assistant.core.visibility import Cited, Visibility, withheld_audit_row

router = APIRouter(prefix="/api", tags=["compliance"])


def require_audit_reader(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    """The caller, if an admin or an auditor (auditors read the trail; documents only through their ACLs).

    Raises:
        PermissionDeniedError: any other caller (a plain user, a service account's key).
    """
    if not (principal.is_admin or principal.is_auditor):
        raise PermissionDeniedError(f"'{principal.name}' may not read the audit trail (admins and auditors only)")
    return principal


AuditReaderDep = Annotated[Principal, Depends(require_audit_reader)]


@router.get("/audit")
async def audit_trail(
    reader: AuditReaderDep,
    db: DatabaseDep,
    request: Request,
    user: str | None = None,
    action: str | None = None,
    doc_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after_id: int = Query(0, ge=0, le=MAX_ROW_ID),
    limit: int = Query(100, ge=1, le=1000),
) -> list[dict[str, Any]]:
    """Audit rows matching the filters, oldest first; page on with `after_id` = the last row's id.
    Reading the trail is itself recorded (`audit.read`).

    An auditor reads every row in full (the role's purpose). An admin who is not an auditor reads a
    row's query text and details only where they may read every document the row names; otherwise the
    row shows who, when, what and which documents, with `query` None and `withheld: true`."""
    query = AuditQuery(user=user, action=action, doc_id=doc_id, since=since, until=until, after_id=after_id, limit=limit)

    def shown() -> list[dict[str, Any]]:
        visibility = Visibility(db, reader, full=reader.is_auditor)
        return [
            row if visibility.may_see(Cited(doc_ids=tuple(row["doc_ids"])), asked_by=row["principal"]) else withheld_audit_row(row)
            for row in list_events(db, query)
        ]

    rows = await run_in_threadpool(shown)
    filters = {k: v for k, v in {"user": user, "action": action, "doc_id": doc_id}.items() if v}
    await run_in_threadpool(
        record_event, db, principal=reader, action="audit.read", details={"filters": filters, "rows": len(rows)},
        **request_origin(request),
    )
    return rows


@router.get("/audit/verify")
async def audit_verify(_reader: AuditReaderDep, db: DatabaseDep) -> dict[str, Any]:
    """The hash chain's verification (`assistant audit verify`): `ok`, rows checked, the first broken row."""
    return (await run_in_threadpool(verify_chain, db)).to_dict()


@router.post("/users/{name}/unlock")
async def unlock_user(name: str, admin: AdminDep, db: DatabaseDep, request: Request) -> dict[str, Any]:
    """Clear user `name`'s sign-in throttling from every address.

    Raises:
        NotFoundError: no account has that name and no failure is recorded for it (404).
    """
    cleared = await run_in_threadpool(unlock_account, db, name)
    await run_in_threadpool(
        record_event, db, principal=admin, action="auth.unlock", details={"target": name}, **request_origin(request)
    )
    return {"user": name, "addresses_cleared": cleared}


@router.patch("/users/{name}", response_model=UserPublic)
async def update_user_flags(name: str, body: UserFlagsUpdate, admin: AdminDep, db: DatabaseDep, request: Request) -> UserPublic:
    """Grant or withdraw the auditor role; place or lift a legal hold.

    Raises:
        NotFoundError: no such user.
    """
    user = await run_in_threadpool(set_flags, db, name, is_auditor=body.is_auditor, legal_hold=body.legal_hold)
    await run_in_threadpool(
        record_event, db, principal=admin, action="admin.user",
        details={"target": name, "change": body.model_dump(exclude_none=True)}, **request_origin(request),
    )
    return user


@router.get("/users/{name}/export")
async def export_user_data(name: str, admin: AdminDep, db: DatabaseDep, request: Request) -> FileResponse:
    """User `name`'s conversations, feedback, keys and uploads (with the files) as a zip of JSON.

    The admin's own reading rights apply (`assistant.core.visibility`): a question, answer or rating
    whose answer cited a document the admin may not read is in the zip with its text withheld, and an
    upload the admin may not read without its file name and file. `assistant users export` on the
    server (the operator) writes the complete export.

    Raises:
        NotFoundError: no such user.
    """
    folder = Path(tempfile.mkdtemp(prefix="assistant-export-"))
    target = folder / f"{name}.zip"
    counts = await run_in_threadpool(lambda: export_user(db, name, target, visibility=Visibility(db, admin)))
    await run_in_threadpool(
        record_event, db, principal=admin, action="admin.export", details={"target": name, "counts": counts},
        **request_origin(request),
    )

    def cleanup() -> None:
        target.unlink(missing_ok=True)
        folder.rmdir()

    return FileResponse(target, media_type="application/zip", filename=f"{name}.zip", background=BackgroundTask(cleanup))


@router.post("/users/{name}/erase")
async def erase_user_data(name: str, admin: AdminDep, assistant: AssistantDep, request: Request) -> dict[str, Any]:
    """Erase user `name` (as `assistant users erase`); returns what was deleted.

    Raises:
        NotFoundError: no such user.
    """
    res = assistant.resources
    report = await run_in_threadpool(
        lambda: erase_user(
            res.db, name, store=res.store, tables_dir=res.settings.tables_dir, redact_audit=res.settings.retention.erasure_audit_content == "redact",
            actor=admin, origin=request_origin(request),
        )
    )
    return report.to_dict()


@router.post("/retention/run")
async def run_retention(_admin: AdminDep, assistant: AssistantDep, request: Request) -> dict[str, Any]:
    """Apply the retention settings now (as the scheduled job does); returns what was deleted."""
    res = assistant.resources
    asked_by = request_id(request)
    report = await run_in_threadpool(
        lambda: apply_retention(res.db, settings=res.settings, store=res.store, request_id=asked_by)
    )
    return report.to_dict()
