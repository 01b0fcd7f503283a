"""The queries on sources (the folders and files documents come from), and the rule that an ACL
manifest belongs to a whole folder source, which the API and the ingestion pipeline both apply.

Removing a source (`assistant.operations.sources.remove_source`) deletes its points from the vector store first, then
its rows with `delete_source_rows`, so that a removal cut short is finished by running it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select, update

from assistant.core.db.models import Document, Job, Source
from assistant.core.db.session import Database, changed_rows
from assistant.core.errors import InvalidRequestError


@dataclass(frozen=True)
class SourceRecord:
    """A source: `kind` `folder` or `file`, the local `path` its `uri` names, and the ACL manifest
    stored with it (a dict as `assistant.auth.acl_manifest.AclManifest.to_dict` writes it; None before its first sync)."""

    id: int
    kind: str
    uri: str
    path: Path
    acl_manifest: dict[str, Any] | None


def list_sources(db: Database) -> list[SourceRecord]:
    """Every source, in the order they were created."""
    with db.session() as session:
        return [
            SourceRecord(id=s.id, kind=s.kind, uri=s.uri, path=s.path, acl_manifest=s.acl_manifest)
            for s in session.scalars(select(Source).order_by(Source.id))
        ]


def enclosing_folder_source(sources: Sequence[SourceRecord], path: Path) -> SourceRecord | None:
    """The innermost folder source that is `path` or holds it, if any."""
    enclosing = [s for s in sources if s.kind == "folder" and (path == s.path or s.path in path.parents)]
    return max(enclosing, key=lambda s: len(s.path.parts), default=None)


def check_manifest_scope(sources: Sequence[SourceRecord], path: Path, *, remedy: str) -> None:
    """Refuse an ACL manifest sent for `path` when `path` lies inside a folder source: the manifest
    belongs to the whole source, whose relative paths its rules match.

    Args:
        remedy: how the caller changes the source's manifest instead, with `{root}` for its folder
            (the API and the CLI say it in their own terms).

    Raises:
        InvalidRequestError: naming `path`, the source and the remedy.
    """
    source = enclosing_folder_source(sources, path)
    if source is not None and source.path != path:
        raise InvalidRequestError(
            f"path {str(path)!r} lies inside the source {str(source.path)!r}, whose ACL manifest covers it; "
            + remedy.format(root=source.path)
        )


def take_over_sources(db: Database, outer: Path, inner: Sequence[SourceRecord]) -> None:
    """Make the folder `outer` a source (if it is not one) and move the documents and jobs of the
    sources `inner` (folders inside it) over to it, deleting those sources."""
    with db.session() as session:
        source = session.scalar(select(Source).where(Source.uri == outer.as_uri()))
        if source is None:
            source = Source(kind="folder", uri=outer.as_uri())
            session.add(source)
            session.flush()
        olds = session.scalars(select(Source.id).where(Source.uri.in_([s.uri for s in inner]))).all()
        session.execute(update(Document).where(Document.source_id.in_(olds)).values(source_id=source.id))
        session.execute(update(Job).where(Job.source_id.in_(olds)).values(source_id=source.id))
        session.execute(delete(Source).where(Source.id.in_(olds)))


def open_source(
    db: Database, uri: str, kind: str, acl: dict[str, Any] | None, *, default: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    """The source at `uri` (created with `kind` when new) and the ACL manifest a sync applies, as the
    dict `AclManifest.to_dict` writes: `acl` when given, stored with the source; else the one stored
    before; else `default` (everyone may read), stored.

    Returns:
        `(source ID, manifest)`.
    """
    manifest = acl if acl is not None else default
    with db.session() as session:
        source = session.scalar(select(Source).where(Source.uri == uri))
        if source is None:
            source = Source(kind=kind, uri=uri)
            session.add(source)
            session.flush()
        if acl is not None or source.acl_manifest is None:
            source.acl_manifest = manifest
        else:
            manifest = source.acl_manifest
        return source.id, manifest


@dataclass(frozen=True)
class SourceRow:
    """One registered source: its id, kind (`folder` or `file`), local path, live documents (not
    deleted at the source), their chunks, and when it was last synced (None: never finished)."""

    id: int
    kind: str
    path: str
    documents: int
    chunks: int
    last_synced_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (`last_synced_at` as ISO 8601 or None)."""
        row = asdict(self)
        row["last_synced_at"] = self.last_synced_at.isoformat() if self.last_synced_at else None
        return row


def source_summaries(db: Database) -> list[SourceRow]:
    """Every registered source with its document and chunk counts, ordered by path (`assistant sources list`)."""
    return sorted(_rows(db, None), key=lambda r: r.path)


def source_summary_by_uri(db: Database, uri: str) -> SourceRow | None:
    """The source registered under `uri` (the `file://` URI of a folder or file), or None."""
    return next(iter(_rows(db, uri)), None)


def _rows(db: Database, uri: str | None) -> list[SourceRow]:
    """Sources (all, or the one with `uri`) with their live documents and chunks counted."""
    with db.session() as session:
        query = select(Source) if uri is None else select(Source).where(Source.uri == uri)
        sources = list(session.scalars(query))
        counts = {
            source_id: (n, int(chunks or 0))
            for source_id, n, chunks in session.execute(
                select(Document.source_id, func.count(Document.id), func.sum(Document.chunk_count))
                .where(Document.deleted_at.is_(None), Document.source_id.in_([s.id for s in sources]))
                .group_by(Document.source_id)
            )
        }
        return [
            SourceRow(
                id=src.id, kind=src.kind, path=str(src.path), documents=counts.get(src.id, (0, 0))[0],
                chunks=counts.get(src.id, (0, 0))[1], last_synced_at=src.last_synced_at,
            )
            for src in sources
        ]


def source_document_ids(db: Database, source_id: int) -> list[str]:
    """IDs of every document row of source `source_id`, those deleted at the source included."""
    with db.session() as session:
        return list(session.scalars(select(Document.id).where(Document.source_id == source_id).order_by(Document.id)))


def delete_source_rows(db: Database, source_id: int) -> int:
    """Delete source `source_id` and its document rows in one transaction; its jobs stay, detached
    from it (their history is kept). Returns the number of document rows deleted."""
    with db.session() as session:
        deleted = changed_rows(session, delete(Document).where(Document.source_id == source_id))
        session.execute(update(Job).where(Job.source_id == source_id).values(source_id=None))
        session.execute(delete(Source).where(Source.id == source_id))
    return deleted
