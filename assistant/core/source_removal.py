"""Deleting a source's documents: their chunks and queryable tables leave first, then the document rows
and the source row, so that a removal cut short leaves rows a second run finds and finishes (never chunks
or a tables file without a document row that could delete them). `assistant.operations.sources.remove_source` (the CLI),
the upload routes (an owner deleting an upload) and `assistant.compliance.erasure` (erasure, retention)
all delete through it.

The kernel names where a document's tables live (`tables_file`) so that every deletion here removes them;
`assistant.tables` writes and reads that file (issue 40)."""

from __future__ import annotations

from pathlib import Path

from assistant.core.db.session import Database
from assistant.core.db.sources import delete_source_rows, source_document_ids
from assistant.core.vectorstore import VectorStore


def tables_file(tables_dir: Path, doc_id: str) -> Path:
    """The duckdb file of document `doc_id`'s queryable tables (`Settings.tables_dir`/<doc_id>.duckdb;
    it exists only when the document has sheets above `ASSISTANT_TABLE_MIN_ROWS`)."""
    return Path(tables_dir) / f"{doc_id}.duckdb"


def remove_tables_file(tables_dir: Path, doc_id: str) -> None:
    """Delete document `doc_id`'s tables file and a leftover write-ahead log, if any."""
    path = tables_file(tables_dir, doc_id)
    for p in (path, Path(str(path) + ".wal")):
        p.unlink(missing_ok=True)


def delete_source_contents(
    db: Database, store: VectorStore, source_id: int, *, tables_dir: Path
) -> tuple[int, int]:
    """Delete every point and tables file of source `source_id`'s documents, then its document rows and
    the source row.

    Args:
        tables_dir: the documents' tables folder (`Settings.tables_dir`).

    Returns:
        `(document rows deleted, points deleted)`.
    """
    chunks = 0
    for doc_id in source_document_ids(db, source_id):
        ids = sorted(store.scroll_ids(doc_id=doc_id))
        if ids:
            store.delete(ids)
            chunks += len(ids)
        remove_tables_file(tables_dir, doc_id)
    return delete_source_rows(db, source_id), chunks
