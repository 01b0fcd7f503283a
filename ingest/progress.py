"""Live progress of one sync: files done of the total, chunks written, OCR pages, rate and ETA.

The counts go to the job row's `totals` as they change (at most once per `interval_s`), so that
`assistant jobs`, the API and a CLI following the job through the server see a running job's
progress, and to an optional listener (the CLI's progress bar or its JSON lines).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from assistant.core.db.jobs import update_job_totals
from assistant.core.db.session import Database


class LiveTotals:
    """The running counts of one sync.

    Args:
        db: the database holding the job row.
        job_id: the `Job` row to update.
        interval_s: least seconds between two writes to the job row.
        listener: called with `snapshot()` after each change (not throttled).
    """

    def __init__(
        self, db: Database, job_id: int, *, interval_s: float = 1.0,
        listener: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.db, self.job_id, self.interval_s, self.listener = db, job_id, interval_s, listener
        self.started = time.monotonic()
        self.files_total = 0
        self.files_done = 0
        self.chunks = 0
        self.chunks_in_progress = 0  # points already written for documents still being indexed
        self.ocr_pages = 0
        self.by_status: dict[str, int] = {}
        self._written = 0.0

    def total(self, files: int) -> None:
        """Set the number of files the run will look at."""
        self.files_total = files
        self.publish(force=True)

    def file(self, status: str, chunks: int, *, attachment: bool = False) -> None:
        """Count one finished document (a file, an attachment, or a deletion).

        Args:
            status: its outcome (done, skipped, failed, ..., deleted).
            chunks: chunks written for it (counted when done).
            attachment: it was carried inside a file (counted by status, not as one of the files).
        """
        self.by_status[status] = self.by_status.get(status, 0) + 1
        if status != "deleted" and not attachment:
            self.files_done += 1
        if status == "done":
            self.chunks += chunks
        self.publish()

    def written(self, chunks: int) -> None:
        """Count the points of one part of a document still being indexed (a big file comes in parts);
        a negative count takes them back when the document finishes, and `file` counts it whole."""
        self.chunks_in_progress += chunks
        if chunks > 0:
            self.publish()

    def page(self) -> None:
        """Count one page recognised by OCR (the file it belongs to is still being parsed)."""
        self.ocr_pages += 1
        self.publish()

    def snapshot(self) -> dict[str, Any]:
        """The counts now.

        Returns:
            `files_total`, `files_done`, `chunks` (written so far, the parts of documents still being
            indexed included: a big file shows progress before it is done), `ocr_pages`, one count per
            outcome status, `elapsed_s`, `rate_chunks_s` (chunks written per second so far) and `eta_s`
            (seconds left at the rate of files so far; None before the first file).
        """
        elapsed = time.monotonic() - self.started
        left = max(0, self.files_total - self.files_done)
        eta = round(elapsed / self.files_done * left, 1) if self.files_done else None
        chunks = self.chunks + self.chunks_in_progress
        return {
            "files_total": self.files_total, "files_done": self.files_done, "chunks": chunks,
            "ocr_pages": self.ocr_pages, **self.by_status, "elapsed_s": round(elapsed, 1),
            "rate_chunks_s": round(chunks / elapsed, 2) if elapsed > 0 else 0.0, "eta_s": eta,
        }

    def publish(self, *, force: bool = False) -> None:
        """Tell the listener, and write the job row unless it was written less than `interval_s` ago."""
        snapshot = self.snapshot()
        if self.listener is not None:
            self.listener(snapshot)
        now = time.monotonic()
        if force or now - self._written >= self.interval_s:
            self._written = now
            update_job_totals(self.db, self.job_id, snapshot)
