"""Deleting a source's documents: their chunks leave the vector store first, then the document rows and
the source row, so that a removal cut short leaves rows a second run finds and finishes (never chunks
without a document row that could delete them). `ingest.sources.remove_source` (the CLI) and the
upload routes (an owner deleting an upload) both delete through it."""

from __future__ import annotations

from assistant.core.db.session import Database
from assistant.core.db.sources import delete_source_rows, source_document_ids
from assistant.core.vectorstore import VectorStore


def delete_source_contents(db: Database, store: VectorStore, source_id: int) -> tuple[int, int]:
    """Delete every point of source `source_id`'s documents, then its document rows and the source row.

    Returns:
        `(document rows deleted, points deleted)`.
    """
    chunks = 0
    for doc_id in source_document_ids(db, source_id):
        ids = sorted(store.scroll_ids(doc_id=doc_id))
        if ids:
            store.delete(ids)
            chunks += len(ids)
    return delete_source_rows(db, source_id), chunks
