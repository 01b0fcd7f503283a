"""A user's data, exported (a zip of JSON and their uploaded files) or erased (rows, uploads and their
chunks, keys and sessions; the audit rows stay with their content replaced, per the settings)."""

from __future__ import annotations

import contextlib
import json
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assistant.compliance.audit import record_event
from assistant.compliance.store import UploadFile, erase_user_rows, hold_and_uploads, user_records
from assistant.core.db.session import Database
from assistant.core.errors import ConflictError
from assistant.core.principals import Principal
from assistant.core.source_removal import delete_source_contents
from assistant.core.vectorstore.base import VectorStore
from assistant.core.visibility import Visibility


@dataclass
class ErasureReport:
    """What `erase_user` removed: rows per kind, the uploads' documents and chunks, the files."""

    user: str
    deleted: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"user": self.user, "deleted": dict(self.deleted)}


def export_user(db: Database, name: str, target: Path, *, visibility: Visibility | None = None) -> dict[str, int]:
    """Write user `name`'s data to the zip file `target`: `account.json`, `conversations.json` (with
    their messages), `feedback.json`, `api_keys.json`, `uploads.json` and each uploaded file, as it is
    on disk, under `uploads/<id>/<filename>`. With `visibility` (an admin's export through the API),
    text the rule withholds from its reader is left out (`user_data.user_records`), and so are the
    files of uploads whose name is withheld.

    Returns:
        How many items of each kind the zip holds.

    Raises:
        NotFoundError: no such user.
    """
    records = user_records(db, name, visibility=visibility)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for kind, value in records.items():
            archive.writestr(f"{kind}.json", json.dumps(value, ensure_ascii=False, indent=1))
        for upload in records["uploads"]:
            path = Path(upload["path"]) if upload["path"] else None
            if path is not None and path.is_file():
                archive.write(path, f"uploads/{upload['id']}/{Path(upload['filename']).name}")
    return {kind: (len(value) if isinstance(value, list) else 1) for kind, value in records.items()}


def remove_uploads(db: Database, store: VectorStore, uploads: list[UploadFile], *, tables_dir: Path) -> dict[str, int]:
    """Delete each upload's chunks and queryable tables (under `tables_dir`, `Settings.tables_dir`), then its
    source's document rows and source row, then the file and its folder (through `delete_source_contents`,
    as `assistant.operations.sources.remove_source` does, so a cut-short run is finished by the next and never leaves
    chunks or tables without rows).

    Returns:
        `{"documents": n, "chunks": n, "files": n}` deleted.
    """
    counts = {"documents": 0, "chunks": 0, "files": 0}
    for upload in uploads:
        if upload.source_id is not None:
            documents, chunks = delete_source_contents(db, store, upload.source_id, tables_dir=tables_dir)
            counts["documents"] += documents
            counts["chunks"] += chunks
        path = Path(upload.path)
        if path.is_file():
            path.unlink()
            counts["files"] += 1
        if path.parent.name == upload.id:  # the upload's own folder (uploads/<id>/<filename>), now empty
            with contextlib.suppress(OSError):  # not empty (a file put there by hand) or already gone
                path.parent.rmdir()
    return counts


def erase_user(
    db: Database, name: str, *, store: VectorStore, tables_dir: Path, redact_audit: bool, actor: Principal,
    origin: dict | None = None,
) -> ErasureReport:
    """Erase user `name`: their uploads (files, documents, chunks), conversations, feedback, API keys,
    sessions and account; with `redact_audit`, their audit rows' query text is replaced by `[erased]`.
    The erasure itself is audited as `admin.erasure` by `actor`.

    Args:
        tables_dir: the documents' queryable tables (`Settings.tables_dir`): the uploads' files there go too.
        origin: `record_event` keywords naming where the request came from (auth method, address).

    Raises:
        NotFoundError: no such user.
        ConflictError: the user is under legal hold.
    """
    held, uploads = hold_and_uploads(db, name)
    if held:
        raise ConflictError(
            f"user '{name}' is under legal hold: nothing of theirs may be deleted until `assistant users hold {name} --off`"
        )
    report = ErasureReport(user=name)
    report.deleted.update(remove_uploads(db, store, uploads, tables_dir=tables_dir))
    report.deleted.update(erase_user_rows(db, name, redact_audit=redact_audit, upload_ids=[u.id for u in uploads]))
    record_event(
        db, principal=actor, action="admin.erasure",
        details={"target": name, "deleted": report.deleted, "at": datetime.now(UTC).isoformat()},
        **(origin or {}),
    )
    return report
