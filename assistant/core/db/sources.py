"""SQL of the sources table for listing and removing sources (`assistant sources list | remove`).

The vector store's points are not touched here: `ingest.sources.remove_source` deletes a source's
points first, then its rows with `delete_source_rows`, so that a removal cut short is finished by
running it again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, update

from assistant.core.db.models import Document, Job, Source
from assistant.core.db.session import Database


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

    def to_dict(self) -> dict:
        """JSON-ready form (`last_synced_at` as ISO 8601 or None)."""
        row = asdict(self)
        row["last_synced_at"] = self.last_synced_at.isoformat() if self.last_synced_at else None
        return row


def list_sources(db: Database) -> list[SourceRow]:
    """Every registered source, ordered by path."""
    return sorted(_rows(db, None), key=lambda r: r.path)


def source_by_uri(db: Database, uri: str) -> SourceRow | None:
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
        deleted = session.execute(delete(Document).where(Document.source_id == source_id)).rowcount or 0
        session.execute(update(Job).where(Job.source_id == source_id).values(source_id=None))
        session.execute(delete(Source).where(Source.id == source_id))
    return deleted
