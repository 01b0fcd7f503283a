"""What `assistant ingest` shows while it works, and how it hands its work to a running server.

On a terminal: a Rich progress bar (files done of the total, chunks written, chunks per second, time
left). With `--json`: one JSON line per progress change on stderr (stdout keeps one line per file).
Otherwise (a log file, systemd, CI): one plain line on stderr every `ingest_progress_interval_s`, even
while one long file is being worked on.
When `assistant serve` holds the embedded vector store, the sync runs in the server instead
(`/api/local/ingest`) and this command follows the job's live totals; Ctrl-C asks the server to stop it.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from assistant.cli.local_server import server_url, unreachable_server
from assistant.core.errors import AssistantError, UpstreamUnavailableError
from assistant.core.settings import Settings

POLL_S = 0.5
_FINAL = {"done", "failed", "interrupted"}


class IngestProgress:
    """The progress display of one ingest run: a bar on a terminal, JSON lines on stderr with `--json`.

    Args:
        console: where the bar is drawn (stderr).
        as_json: write progress as JSON lines instead of a bar.
        line_interval_s: when `console` is not a terminal and not `as_json`, seconds between two
            progress lines (`progress_line`) on stderr.
    """

    def __init__(self, console: Console, *, as_json: bool, line_interval_s: float = 30.0):
        self.as_json = as_json
        self.line_interval_s = line_interval_s
        self._lines = not as_json and not console.is_terminal
        self._totals: dict[str, Any] = {}
        self._totals_at = time.monotonic()
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="assistant-ingest-progress", daemon=True)
        self.bar = Progress(
            TextColumn("[bold]ingest[/bold]"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
            TextColumn("{task.fields[chunks]:,} chunks"), TextColumn("{task.fields[rate]:.1f} chunks/s"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"),
            console=console, disable=as_json or not console.is_terminal,
        )
        self.task = self.bar.add_task("", total=None, chunks=0, rate=0.0)
        self._last: tuple = ()

    def __enter__(self) -> IngestProgress:
        self.bar.__enter__()
        if self._lines:
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ticker.is_alive():
            self._stop.set()
            self._ticker.join()
        self.bar.__exit__(*exc)

    def _tick(self) -> None:
        while not self._stop.wait(self.line_interval_s):
            totals, since = dict(self._totals), time.monotonic() - self._totals_at
            print(progress_line(totals, elapsed_s=time.monotonic() - self._started, since_s=since), file=sys.stderr, flush=True)

    def update(self, totals: dict[str, Any], *, current: str = "") -> None:
        """Show the running counts of the job (`ingest.progress.LiveTotals.snapshot` keys).

        Args:
            totals: `files_total`, `files_done`, `chunks`, `rate_chunks_s`, `eta_s`, ...
            current: the file just finished, if known.
        """
        self._totals, self._totals_at = totals, time.monotonic()
        total = totals.get("files_total") or None
        self.bar.update(
            self.task, total=total, completed=totals.get("files_done", 0), chunks=int(totals.get("chunks", 0)),
            rate=float(totals.get("rate_chunks_s") or 0.0), **({"description": current[-50:]} if current else {}),
        )
        if self.as_json:
            key = (totals.get("files_done"), totals.get("chunks"), totals.get("ocr_pages"), totals.get("files_total"))
            if key != self._last:
                self._last = key
                line = {"event": "progress", **{k: totals.get(k) for k in (
                    "files_done", "files_total", "chunks", "ocr_pages", "rate_chunks_s", "eta_s", "elapsed_s")}}
                print(json.dumps(line), file=sys.stderr, flush=True)

    def waiting(self, jobs: list[dict[str, Any]]) -> None:
        """Say that this sync waits behind `jobs` (`JobRecord` dicts of the server's syncs running or
        queued before it): a line on the console (`waiting_line`), or with `--json` a JSON line
        `{"event": "waiting", "jobs": [{id, status, path, files_done, files_total}]}` on stderr."""
        if self.as_json:
            line = {"event": "waiting", "jobs": [
                {"id": j["id"], "status": j["status"], "path": (j.get("params") or {}).get("path"),
                 **{k: (j.get("totals") or {}).get(k) for k in ("files_done", "files_total")}} for j in jobs]}
            print(json.dumps(line, ensure_ascii=False), file=sys.stderr, flush=True)
        else:
            self.bar.console.print(f"[yellow]waiting[/yellow] {escape(waiting_line(jobs))}", soft_wrap=True)


@contextmanager
def stop_on_signals(console: Console) -> Iterator[threading.Event]:
    """An event set by the first SIGINT (Ctrl-C) or SIGTERM while the block runs, so that a sync stops at
    the next file boundary (`Ingestor.sync(stop=...)`); a second signal stops at once: it raises
    KeyboardInterrupt, which the sync turns into `SyncInterrupted` (job `interrupted`, the files not
    finished redone by the next run). The previous handlers come back after the block. Off the main
    thread (no signals there): never set."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():
            console.print(f"{signal.Signals(signum).name}: stopping now")
            raise KeyboardInterrupt
        stop.set()
        console.print(f"{signal.Signals(signum).name}: stopping after the files in progress (again to stop at once)")

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def progress_line(totals: dict[str, Any], *, elapsed_s: float, since_s: float = 0.0) -> str:
    """One line of progress for a log: `ingest: 12/40 files, 3,456 chunks, 41.2 chunks/s, ETA 2m05s,
    elapsed 1m20s`.

    Args:
        totals: the latest `LiveTotals.snapshot` (empty before the files are counted).
        elapsed_s: seconds since the command started.
        since_s: seconds since `totals` was taken (the ETA shrinks by them).
    """
    def clock(seconds: float) -> str:
        minutes, secs = divmod(int(round(seconds)), 60)
        return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"

    if not totals.get("files_total"):
        return f"ingest: listing files, elapsed {clock(elapsed_s)}"
    eta = totals.get("eta_s")
    return (f"ingest: {totals.get('files_done', 0)}/{totals['files_total']} files, {int(totals.get('chunks', 0)):,} chunks, "
            f"{float(totals.get('rate_chunks_s') or 0.0):.1f} chunks/s, "
            f"ETA {'unknown' if eta is None else clock(max(0.0, eta - since_s))}, elapsed {clock(elapsed_s)}")


def waiting_line(jobs: list[dict[str, Any]]) -> str:
    """What a sync queued in the server waits for, naming each job ahead: its ID, path, state and the
    files it has done (`for the sync already running in the server to finish: job 12 of /srv/docs
    (running, 3/40 files)`)."""
    def one(job: dict[str, Any]) -> str:
        totals = job.get("totals") or {}
        done = f", {totals.get('files_done', 0)}/{totals['files_total']} files" if totals.get("files_total") else ""
        return f"job {job['id']} of {(job.get('params') or {}).get('path', '?')} ({job['status']}{done})"

    if len(jobs) == 1:
        what = "the sync already running" if jobs[0]["status"] == "running" else "the sync queued before this one"
    else:
        what = f"the {len(jobs)} syncs ahead of this one"
    return f"for {what} in the server to finish: {'; '.join(one(j) for j in jobs)}"


def ingest_through_server(
    settings: Settings, path: str, acl: dict[str, Any] | None, *,
    on_totals: Callable[[dict[str, Any]], None], on_item: Callable[[dict[str, Any]], None],
    on_wait: Callable[[list[dict[str, Any]]], None] | None = None,
    stop: threading.Event | None = None, stopped_by: str = "", on_stop: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Have the running server sync `path`, following its job until it ends.

    Args:
        settings: this process's settings (the server's address and signing key).
        path: the absolute folder or file path.
        acl: the ACL manifest as a dict, or None.
        on_totals: called with the job's live totals at each poll.
        on_item: called once with each file item (`path`, `status`, `reason`, `chunks`) as it finishes.
        on_wait: called once, as soon as the job is seen queued behind other syncs (the server runs
            them one at a time), with those jobs (`GET /api/local/jobs/{id}/ahead`).
        stop: once set (the first Ctrl-C, `stop_on_signals`), the server is asked to stop the job at its
            next file boundary (`POST /api/local/jobs/{id}/stop`, on behalf of `stopped_by`), and the job
            is followed until it ends `interrupted`.
        on_stop: called once with the job as the server answered that request (or as last seen,
            when it had ended already).

    Returns:
        The finished job (`status` done or `interrupted`, `reason`, `totals`, `items`).

    Raises:
        UpstreamUnavailableError: the server cannot be reached or refused the request.
        AssistantError: the server found the request invalid (400: its code and message).
        AssistantError: the job failed (its reason, code `ingest_failed`).
    """
    import httpx

    from assistant.auth.signing import local_ingest_token

    headers = {"X-Assistant-Local-Token": local_ingest_token(settings)}
    base = server_url(settings)
    seen: set[int] = set()
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=30.0) as client:
            answer = client.post("/api/local/ingest", json={"path": path, "acl": acl})
            if answer.status_code != 202:
                error = answer.json().get("error", {}) if answer.content else {}
                message = error.get("message", answer.text or answer.reason_phrase)
                if answer.status_code == 400:  # the request's own fault (a path gone meanwhile, a bad manifest)
                    raise AssistantError(message, code=error.get("code", "invalid_request"))
                raise UpstreamUnavailableError(f"the server at {base} refused the ingestion: {message}")
            job = answer.json()
            waited = asked = False
            while True:
                if stop is not None and stop.is_set() and not asked:
                    asked = True
                    answer = client.post(f"/api/local/jobs/{job['id']}/stop", json={"by": stopped_by or "cli"})
                    if answer.status_code == 202:
                        job = answer.json()
                    elif answer.status_code != 409:  # 409: it ended meanwhile
                        answer.raise_for_status()
                    if on_stop is not None:
                        on_stop(job)
                for n, item in enumerate(job.get("items") or []):
                    if n not in seen and item["status"] not in ("queued", "running"):
                        seen.add(n)
                        on_item(item)
                on_totals(job.get("totals") or {})
                if job["status"] in _FINAL:
                    break
                if job["status"] == "queued" and not waited and on_wait is not None:
                    ahead = client.get(f"/api/local/jobs/{job['id']}/ahead").raise_for_status().json()
                    if ahead:
                        waited = True
                        on_wait(ahead)
                time.sleep(POLL_S)
                job = client.get(f"/api/local/jobs/{job['id']}").raise_for_status().json()
    except httpx.TransportError as exc:
        raise unreachable_server(
            base, exc, context="another process holds the embedded vector store, so the sync was handed to the server",
            otherwise="if no server runs, another `assistant` command (an ingest) holds the store: wait for it to end",
        ) from exc
    except httpx.HTTPError as exc:
        raise UpstreamUnavailableError(f"the server at {base} holds the vector store but failed the sync: {exc}") from exc
    if job["status"] == "failed":
        raise AssistantError(f"the sync job {job['id']} run by the server failed: {job['reason']}", code="ingest_failed")
    return job
