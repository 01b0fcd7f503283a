"""Moving what the database and the index say about files that lived in a folder that has moved.

A restore into another data folder puts the uploads, the helpdesk resolutions and the finetune files
under new absolute paths. The product names those files by absolute `file://` URI (sources, documents,
chunk payloads) or path (uploads, adapters, dataset snapshots, queued jobs), and a document's ID is
`document_id(uri)` (`index_format`), which the next sync of a file recomputes from its URI. So a
relocation rewrites every one of those to the new folder and gives each moved document the ID of its
new URI, everywhere it is referenced: its row, its job items, the `doc_id` and `uri` of its chunks, and
the citations stored with answers and helpdesk tickets (their `route` names the document), and the name
of its queryable tables file (`DATA_DIR/tables/<doc_id>.duckdb`, issue 40). The audit
log is left as it was written: its rows are hash-chained evidence of what happened then.

The chunks keep their point IDs (`chunk_id` of the old document ID): points are found by `doc_id`, and
the next sync of a changed file writes new points and deletes the stale ones, as after any edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from assistant.core.db.relocate import relocate_rows
from assistant.core.db.session import Database
from assistant.core.index.payload import document_id
from assistant.core.vectorstore.base import VectorStore
from assistant.tables.files import install, tables_file


@dataclass(frozen=True)
class Move:
    """One folder's move: every path under `old` now lies at the same place under `new` (both absolute)."""

    old: Path
    new: Path

    def path(self, value: str) -> str | None:
        """`value` (an absolute path) moved, or None when it is not under `old`."""
        old = str(self.old)
        if value == old:
            return str(self.new)
        if value.startswith(old.rstrip("/") + "/"):
            return str(self.new) + value[len(old.rstrip("/")):]
        return None

    def uri(self, value: str) -> str | None:
        """`value` (a `file://` URI, `#name` of an attachment included) moved, or None when not under `old`."""
        old, new = self.old.as_uri(), self.new.as_uri()
        if value == old or value.startswith(old + "#"):
            return new + value[len(old):]
        if value.startswith(old.rstrip("/") + "/"):
            return new.rstrip("/") + value[len(old.rstrip("/")):]
        return None


def _first(moves: list[Move], value: str, kind: str) -> str | None:
    for move in moves:
        moved = move.uri(value) if kind == "uri" else move.path(value)
        if moved is not None:
            return moved
    return None


def _recite(citations: list[Any] | None, ids: dict[str, str]) -> list[Any] | None:
    """`citations` with moved documents' IDs (and the routes that name them) replaced; None if unchanged."""
    changed = False
    out = []
    for citation in citations or []:
        old = citation.get("doc_id") if isinstance(citation, dict) else None
        if old in ids:
            citation = {**citation, "doc_id": ids[old]}
            if isinstance(citation.get("route"), str):
                citation["route"] = citation["route"].replace(old, ids[old])
            changed = True
        out.append(citation)
    return out if changed else None


def relocate(db: Database, store: VectorStore | None, moves: list[Move], *, tables_dir: Path | None = None) -> dict[str, int]:
    """Rewrite the database and the index for files moved by `moves` (see the module docstring).

    Args:
        db: the restored database (at this release's schema).
        store: the restored collection, or None when there is none yet.
        moves: the folders that moved; a folder that did not move may be left out.
        tables_dir: the restored tables folder (`Settings.tables_dir`): a moved document's tables file
            is renamed to its new ID (issue 40); None leaves the files alone.

    Returns:
        Counts of what was rewritten: `sources`, `documents`, `points`, `paths` (uploads, adapters,
        dataset snapshots, jobs), `citations` (messages and tickets).
    """
    moves = [m for m in moves if m.old != m.new]
    counts = {"sources": 0, "documents": 0, "points": 0, "paths": 0, "citations": 0}
    if not moves:
        return counts
    rows = relocate_rows(
        db, move_uri=partial(_first, moves, kind="uri"), move_path=partial(_first, moves, kind="path"),
        new_document_id=document_id, recite=_recite,
    )
    counts.update(sources=rows.sources, documents=len(rows.documents), paths=rows.paths, citations=rows.citations)
    # After the SQL commit: a failure here leaves points under their old IDs, and `restore --force`
    # starts again from the backup.
    if store is not None:
        for old_id, (new_id, uri) in rows.documents.items():
            counts["points"] += store.count(doc_id=old_id)
            store.set_payload(doc_id=old_id, payload={"doc_id": new_id, "uri": uri})
    if tables_dir is not None:
        for old_id, (new_id, _) in rows.documents.items():
            if tables_file(tables_dir, old_id).exists():
                install(tables_file(tables_dir, old_id), tables_dir=tables_dir, doc_id=new_id)
    return counts
