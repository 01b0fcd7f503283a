"""Where a document's tables live: one duckdb file per document under `tables_dir` (the path is the kernel's
`tables_file`, so that deleting a document removes it), replaced whole (atomic rename)."""

from __future__ import annotations

import os
from pathlib import Path

from assistant.core.source_removal import remove_tables_file, tables_file

__all__ = ["STAGING", "discard", "install", "remove", "staging_file", "tables_file"]

STAGING = ".staging"  # sub-folder of tables_dir where a parse writes its file before it is moved into place


def staging_file(tables_dir: Path, name: str) -> Path:
    """A scratch path for one parse's tables, `name` unique per parse (e.g. '<pid>-<n>'), not yet created."""
    path = Path(tables_dir) / STAGING / f"{name}.duckdb"
    discard(path)
    return path


def install(staged: Path | None, *, tables_dir: Path, doc_id: str) -> None:
    """Make `staged` the document's tables, replacing the old ones; None removes them (no large sheet left).

    The rename is atomic on one file system (the staging folder is inside `tables_dir`), so a reader
    sees the old file or the new one, never half of one.
    """
    target = tables_file(tables_dir, doc_id)
    if staged is None or not Path(staged).exists():
        remove(tables_dir, doc_id)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, target)
    discard(Path(str(staged) + ".wal"))


def remove(tables_dir: Path, doc_id: str) -> None:
    """Delete the document's tables, if any (its file and a leftover write-ahead log); the kernel's
    `remove_tables_file`, which every deletion of documents (`delete_source_contents`) also calls."""
    remove_tables_file(tables_dir, doc_id)


def discard(path: Path | None) -> None:
    """Delete a tables file and its write-ahead log if present (a failed parse's scratch file)."""
    if path is None:
        return
    for p in (Path(path), Path(str(path) + ".wal")):
        p.unlink(missing_ok=True)
