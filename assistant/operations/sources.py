"""Removing a source: its chunks leave the vector store, then its document rows and the source row.

A source is what `assistant ingest PATH` registered: a folder (synced recursively) or a lone file.
Its documents stay searchable until the source is removed; ingesting the folder again later starts
a new source.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from assistant.core.db.sources import source_summaries, source_summary_by_uri
from assistant.core.errors import ConflictError, NotFoundError
from assistant.core.resources import Resources
from assistant.core.source_removal import delete_source_contents
from assistant.operations.store import active_syncs_of, close_interrupted_syncs, delete_uploads_stored_at


@dataclass(frozen=True)
class RemovedSource:
    """What `remove_source` did: the source's path, the document rows and vector-store points deleted."""

    path: str
    documents: int
    chunks: int

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def remove_source(res: Resources, path: Path) -> RemovedSource:
    """Remove the source registered for `path` (the folder or file given to `ingest`; it need not
    exist on disk any more): delete every point of its documents, then its document rows and the
    source row. Points go first, so a removal cut short leaves rows that a second run finds and
    finishes; it never leaves chunks without a document row that could delete them.

    Args:
        res: this process's resources (its SQL database and vector store).
        path: the source's folder or file, absolute or relative to the working directory.

    Raises:
        ConflictError: code `sync_running`: a sync of `path` is queued or running (it would index the
            documents again).
        NotFoundError: no source is registered for `path` (the message lists the registered ones;
            a sub-folder of a source is part of it, not a source of its own).
    """
    path = Path(path).expanduser().resolve()
    running = active_syncs_of(res.db, str(path))
    if running:
        raise ConflictError(
            f"source {path} is being synced (job {running[0]}): stop it (Ctrl-C on its `assistant ingest`, Stop in "
            f"the admin jobs view, or POST /api/jobs/{running[0]}/stop) or let it finish, then remove the source",
            code="sync_running",
        )
    source = source_summary_by_uri(res.db, path.as_uri())
    if source is None:
        known = ", ".join(row.path for row in source_summaries(res.db)) or "none"
        raise NotFoundError(f"no source is registered for {path}; registered sources: {known}")
    # An interrupted sync of it would be resumed at the next start and index it all again (fresh-user trial).
    close_interrupted_syncs(res.db, str(path), source.id, reason=f"source {source.path} was removed: not resumed")
    documents, chunks = delete_source_contents(res.db, res.store, source.id, tables_dir=res.settings.tables_dir)
    # An upload is a file source of its own: removing that source removes the upload (its stored file and
    # row), else its owner would go on seeing it listed as done with nothing behind it (fresh-user trial).
    for stored in delete_uploads_stored_at(res.db, path.as_uri()):
        shutil.rmtree(stored.parent, ignore_errors=True)  # the upload's own folder (`uploads/<id>/<name>`)
    return RemovedSource(path=source.path, documents=documents, chunks=chunks)
