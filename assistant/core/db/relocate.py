"""Rewriting, in one transaction, every path and `file://` URI the database holds for files whose folder
moved (`assistant.operations.relocate` says which values move and how citations name a document)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update

from assistant.core.db.models import (
    Adapter,
    DatasetSnapshot,
    Document,
    HelpdeskTicket,
    Job,
    JobItem,
    Message,
    Source,
    Upload,
)
from assistant.core.db.session import Database


@dataclass(frozen=True)
class RelocatedRows:
    """What `relocate_rows` rewrote: source rows, moved documents (`{old ID: (new ID, new URI)}`),
    paths (uploads, adapters, dataset snapshots, jobs' `params.path`) and rows whose citations changed
    (messages and helpdesk tickets)."""

    sources: int
    documents: dict[str, tuple[str, str]]
    paths: int
    citations: int


def relocate_rows(
    db: Database,
    *,
    move_uri: Callable[[str], str | None],
    move_path: Callable[[str], str | None],
    new_document_id: Callable[[str], str],
    recite: Callable[[list[Any] | None, dict[str, str]], list[Any] | None],
) -> RelocatedRows:
    """Rewrite sources, documents (ID and URI, and their job items), paths and citations in one
    transaction: all of it is committed, or nothing.

    Args:
        move_uri: a URI moved, or None when it did not move.
        move_path: an absolute path moved, or None when it did not move.
        new_document_id: a moved document's ID from its new URI.
        recite: a row's citations with moved documents' IDs (`{old: new}`) replaced; None if unchanged.
    """
    ids: dict[str, str] = {}
    uris: dict[str, str] = {}
    sources = paths = citations = 0
    with db.session() as session:
        for source in session.scalars(select(Source)):
            moved = move_uri(source.uri)
            if moved is not None:
                source.uri = moved
                sources += 1
        for old_id, uri in session.execute(select(Document.id, Document.uri)).all():
            moved = move_uri(uri)
            if moved is not None:
                ids[old_id], uris[old_id] = new_document_id(moved), moved
        for old_id, new_id in ids.items():
            session.execute(update(Document).where(Document.id == old_id).values(id=new_id, uri=uris[old_id]))
            session.execute(update(JobItem).where(JobItem.document_id == old_id).values(document_id=new_id))
        with_paths: list[Upload | Adapter | DatasetSnapshot] = [
            *session.scalars(select(Upload).where(Upload.path != "")),
            *session.scalars(select(Adapter).where(Adapter.path != "")),
            *session.scalars(select(DatasetSnapshot).where(DatasetSnapshot.path != "")),
        ]
        for row in with_paths:
            moved = move_path(row.path)
            if moved is not None:
                row.path = moved
                paths += 1
        for job in session.scalars(select(Job)):
            path = (job.params or {}).get("path")
            moved = move_path(path) if isinstance(path, str) else None
            if moved is not None:
                job.params = {**job.params, "path": moved}
                paths += 1
        if ids:
            for cited in (Message, HelpdeskTicket):
                rows = session.execute(select(cited.id, cited.citations)).all()
                for row_id, stored in rows:
                    recited = recite(stored, ids)
                    if recited is not None:
                        session.execute(update(cited).where(cited.id == row_id).values(citations=recited))
                        citations += 1
    return RelocatedRows(sources, {old: (ids[old], uris[old]) for old in ids}, paths, citations)
