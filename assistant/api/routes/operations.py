"""Operator actions on the running server: `POST /api/admin/backup` (admins or the operator token)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from assistant.api.operator_auth import require_token_or_admin
from assistant.auth.operator_token import is_operator_token
from assistant.operations.backup import take_backup

router = APIRouter(prefix="/api/admin")

BACKUPS_DIR = "backups"


@router.post("/backup", include_in_schema=False)
async def backup(request: Request) -> dict:
    """Back up this deployment while it serves, into `DATA_DIR/backups/<UTC time>` on the server.

    The server takes it because it owns the embedded vector store (one process may open it): its
    writes are held while the folder is copied. `assistant backup PATH` calls this when the server
    runs, then moves the folder to PATH.

    Returns:
        `{"path": the backup folder on the server, "manifest": its manifest}`.

    Raises:
        AuthenticationError / PermissionDeniedError: neither the operator token nor an admin.
    """
    settings = request.app.state.settings
    await require_token_or_admin(request, lambda value: is_operator_token(settings, value))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    dest = settings.storage.data_dir / BACKUPS_DIR / stamp
    manifest = await run_in_threadpool(take_backup, request.app.state.assistant.resources, dest)
    return {"path": str(dest.resolve()), "manifest": manifest}
