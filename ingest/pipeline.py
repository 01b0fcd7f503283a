"""The ingestion pipeline: sync a folder (or one file) into the collection, one job row per run.

Invariants kept here: chunk IDs are deterministic (document ID + position + chunk hash), so a re-run
changes nothing; an updated file replaces its chunks (new ones upserted first, stale ones deleted
after, so that a run cut short by a crash converges when it is run again); a file deleted at the
source loses its chunks; a bad file fails alone with a reason.

Throughput: files are parsed and chunked in a child process (`ingest.isolated_parse`, which also
enforces the per-file time and memory limits, and hands a big file's chunks over in parts of
`parse_part_chunks`) while this process embeds; chunks of several files are
gathered in batches of `embedding_batch_chunks` chunks, embedded `embedding_slice_chunks` at a time
(each slice written as soon as its vectors are in); a text embedded before (same file at another
path, unchanged paragraphs of an edited file) reuses its vector from the `EmbeddingCache`.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pathspec

from assistant.auth.acl_manifest import AclManifest
from assistant.core.db.jobs import fail_job, finish_sync_job, interrupt_job, reset_items, start_sync_job
from assistant.core.db.sources import (
    check_manifest_scope,
    enclosing_folder_source,
    list_sources,
    open_source,
    take_over_sources,
)
from assistant.core.errors import InvalidRequestError, not_utf8
from assistant.core.index.payload import NAMESPACE, chunk_id, document_id
from assistant.core.resources import Resources
from assistant.core.settings import Settings
from ingest.embedding_cache import EmbeddingCache
from ingest.isolated_parse import IsolatedParser
from ingest.pii_masking import stored_pii_kinds
from ingest.progress import LiveTotals
from ingest.sync_run import FileOutcome, SyncRun

if TYPE_CHECKING:
    from ingest.tasks import JobStop

__all__ = ["NAMESPACE", "FileOutcome", "Ingestor", "SyncInterrupted", "chunk_id", "document_id", "iter_files"]

DONE_STATES = {"done", "skipped"}


IGNORE_FILE = ".assistantignore"


class SyncInterrupted(Exception):  # noqa: N818 - the run was stopped on request, not an error
    """A sync stopped at a file boundary because its `stop` event was set (SIGINT, SIGTERM): the files
    started were finished, the others left for the next run, and the job row says `interrupted`.

    Attributes:
        job_id: the interrupted job. outcomes: the files finished, in file order. files_total: files found.
    """

    def __init__(self, job_id: int, outcomes: list[FileOutcome], files_total: int):
        super().__init__(f"sync job {job_id} interrupted after {len(outcomes)} of {files_total} files")
        self.job_id, self.outcomes, self.files_total = job_id, outcomes, files_total


def iter_files(root: Path, *, leave_out: Iterable[Path] = ()) -> Iterable[Path]:
    """Every regular file under `root`, sorted; hidden files and folders skipped, and those that the
    folder's `.assistantignore` names (gitignore syntax, read by `pathspec`; e.g. `screenshots/`,
    `*.tmp`, `!keep.tmp`). A file ignored after it was indexed leaves the index at the next sync, as a
    deleted file does.

    Args:
        root: the folder, resolved.
        leave_out: folders never listed when they lie in `root`, whatever the ignore file says (the
            product's own: `product_folders`).

    Raises:
        InvalidRequestError: `.assistantignore` is not UTF-8 text, or holds a line that is not a pattern.
    """
    return (path for path, ignored in _walk(root, leave_out) if not ignored)


def ignored_files(root: Path, *, leave_out: Iterable[Path] = ()) -> int:
    """How many files of `root` its `.assistantignore` leaves out (hidden ones and `leave_out` not
    counted); arguments and errors as `iter_files`."""
    return sum(ignored for _, ignored in _walk(root, leave_out))


def _walk(root: Path, leave_out: Iterable[Path]) -> Iterable[tuple[Path, bool]]:
    """(file, whether `.assistantignore` leaves it out) for every regular file `iter_files` looks at."""
    ignored = _ignore_spec(root)
    left_out = [rel for rel in (_relative(Path(f).resolve(), root) for f in leave_out) if rel is not None]
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or any(rel.parts[: len(f.parts)] == f.parts for f in left_out):
            continue
        if path.is_file() and not path.is_symlink():
            yield path, bool(ignored and ignored.match_file(rel.as_posix()))


def _relative(folder: Path, root: Path) -> Path | None:
    """`folder` relative to `root` when it is `root` or lies inside it, else None."""
    return folder.relative_to(root) if folder == root or root in folder.parents else None


def product_folders(settings: Settings) -> list[Path]:
    """The folders no source may index: the data folder (its database, vector store segments, caches)
    and the model cache. A source inside them (uploads, helpdesk resolutions) is not affected."""
    return [settings.storage.data_dir.resolve(), settings.model_cache_path.resolve()]


def _ignore_spec(root: Path) -> pathspec.GitIgnoreSpec | None:
    """The patterns of `root`/.assistantignore, or None when the folder has none."""
    file = root / IGNORE_FILE
    if not file.is_file():
        return None
    try:
        return pathspec.GitIgnoreSpec.from_lines(file.read_text(encoding="utf-8").splitlines())
    except UnicodeDecodeError as exc:
        raise not_utf8(str(file), exc) from exc
    except (ValueError, TypeError) as exc:  # pathspec's GitWildMatchPatternError is a ValueError
        raise InvalidRequestError(f"{file}: {exc}; see docs/getting-started.md for the syntax") from exc


def _printable(name: str) -> str:
    """`name` with the undecodable bytes of a non-UTF-8 file name (surrogate escapes) as `\\xNN`."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class Ingestor:
    """Turns files into points for one process's resources. Call `close()` when done.

    Args:
        resources: DB, vector store and embedder of this process.
    """

    def __init__(self, resources: Resources):
        self.res = resources
        settings = resources.settings
        embedder = resources.embedder
        self.embedder = embedder
        self.batch_chunks = settings.ingest.embedding_batch_chunks
        self.parser = IsolatedParser(
            tokenizer_path=embedder.path,
            max_tokens=embedder.max_text_tokens,
            chunk_tokens=settings.ingest.chunk_size_tokens or getattr(embedder, "chunk_tokens", 0),
            overlap_tokens=settings.ingest.chunk_overlap_tokens,
            timeout_s=settings.ingest.parse_timeout_s,
            memory_limit_bytes=settings.ingest.parse_memory_limit_bytes,
            log_path=settings.storage.data_dir / "logs" / "parser.log",
            part_chunks=settings.ingest.parse_part_chunks,
            tables_dir=settings.tables_dir,
        )
        # One thread: batches are embedded in order while this thread writes the previous one.
        self.embed_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assistant-embed")
        self.cache = EmbeddingCache(
            settings.storage.data_dir / "embedding-cache.sqlite", model=embedder.name, dim=embedder.dim,
            max_vectors=settings.ingest.embedding_cache_max_vectors,
        )
        resources.store.ensure_collection(embedder.dim)

    def close(self) -> None:
        """Stop the parser process and the embedding thread, close the embedding cache."""
        self.parser.close()
        self.embed_thread.shutdown(wait=True, cancel_futures=True)
        self.cache.close()

    # -- one run -------------------------------------------------------------------------------
    def sync(
        self,
        path: Path,
        *,
        acl: AclManifest | None = None,
        job_id: int | None = None,
        on_file: Callable[[FileOutcome], None] | None = None,
        on_total: Callable[[int], None] | None = None,
        on_progress: Callable[[dict], None] | None = None,
        stop: threading.Event | JobStop | None = None,
    ) -> list[FileOutcome]:
        """Ingest a folder recursively, or one file; return one outcome per file, in file order.

        Unchanged files (same sha256, same model, all chunks present) are skipped. For a folder,
        documents that vanished since the last sync lose their chunks (outcome `deleted`). `source`
        in outcomes is the path relative to the folder (the file name for a single file). The job
        row `job_id` (created when None) goes running -> done (or failed, with the error, when the
        run itself breaks); each file gets a `JobItem` queued -> running -> its outcome.

        Args:
            path: a folder or a file.
            acl: ACL manifest for this source (default: the one stored with the source, else everyone).
            job_id: an existing `Job` row to run (a resumed or queued job).
            on_file: called with each outcome as it is recorded.
            on_total: called once with the number of files found.
            on_progress: called with the running counts (`LiveTotals.snapshot`) after each file and
                each OCR page; the same counts go to the job row's totals while it runs.
            stop: when set (an event, or the `JobStop` of a job asked to stop), no further file is
                started: the files being parsed or embedded are finished and written, nothing is
                deleted, and the job is marked `interrupted` (resumed by
                `JobDispatcher.resume_unfinished`; a new sync skips the files done). A
                KeyboardInterrupt (a second Ctrl-C), or its embedding slices cancelled (a server that exits,
                `ingest.tasks.interrupted_when_cut_off`), stops at once and marks it `interrupted` too: the
                files not finished keep their documents `running`, so the next sync parses them again.

        Raises:
            InvalidRequestError: `path` does not exist.
            SyncInterrupted: `stop` was set before the last file was started, or a KeyboardInterrupt
                stopped the run.
        """
        path = Path(path).resolve()
        if not path.exists():
            raise InvalidRequestError(f"ingest path {path} does not exist")
        if _printable(str(path)) != str(path):
            raise InvalidRequestError(f"ingest path {_printable(str(path))} is not valid UTF-8: rename it first")
        files = list(iter_files(path, leave_out=product_folders(self.res.settings))) if path.is_dir() else [path]
        root, source_uri, kind = self._source_of(path, acl)
        masked_before = stored_pii_kinds(self.res.db, source_uri)
        source_id, job_id, manifest = self._start_job(source_uri, kind, path, acl, job_id)
        # A file name that is not UTF-8 keeps its bytes on disk and gets an escaped name (`bad\xffname.md`)
        # in outcomes, SQL and payloads, so that it is ingested like any other instead of breaking the run.
        rels = [_printable(f.relative_to(root).as_posix()) for f in files]
        run = SyncRun(
            store=self.res.store, db=self.res.db, parser=self.parser, embedder=self.embedder, cache=self.cache,
            embed_executor=self.embed_thread, batch_chunks=self.batch_chunks,
            slice_chunks=self.res.settings.ingest.embedding_slice_chunks,
            job_id=job_id, source_id=source_id, on_file=on_file,
        )
        run.pii_kinds = manifest.mask_pii
        run.tables_dir = self.res.settings.tables_dir
        run.reparse_all = masked_before is not None and masked_before != manifest.mask_pii
        run.live = LiveTotals(self.res.db, job_id, listener=on_progress)
        run.stop = stop
        self.parser.on_progress = lambda key, progress: run.live.page()
        try:
            item_ids = reset_items(self.res.db, job_id, rels, [manifest.acl_for(rel) for rel in rels])
            run.live.total(len(files))
            if on_total:
                on_total(len(files))
            with tempfile.TemporaryDirectory(prefix="assistant-attachments-") as scratch:
                run.scratch = Path(scratch)
                started = 0
                for index, (file, rel) in enumerate(zip(files, rels)):
                    if stop is not None and stop.is_set():
                        break
                    started = index + 1
                    run.start(file, rel, file.resolve().as_uri(), (index, ""), manifest.acl_for(rel), 0, item_ids[index])
                    while self.parser.pending > 1:  # keep one file parsing while this process embeds
                        run.collect()
                while self.parser.pending:
                    run.collect()
                if stop is not None and stop.is_set():  # files parsed but not yet sent to the embedder wait too
                    run.drop_unsent()
                run.drain()
            if started < len(files) or run.cut_short:  # stopped: what was not finished stays, as does what it would delete
                outcomes = [run.outcomes[k] for k in sorted(run.outcomes)]
                reason = (f"interrupted after {run.live.files_done} of {len(files)} files; the rest is indexed when "
                          "the job resumes (server start) or the folder is ingested again")
                interrupt_job(self.res.db, job_id, reason, totals={**run.live.snapshot(), "files_total": len(files)})
                raise SyncInterrupted(job_id, outcomes, len(files))
            if path.is_dir():
                run.delete_missing(under="" if path == root else path.relative_to(root).as_posix() + "/")
        except SyncInterrupted:
            raise
        except (KeyboardInterrupt, CancelledError):  # a second Ctrl-C, or a server that exits: stopped at once
            self.parser.close()  # outstanding requests belong to this run
            outcomes = [run.outcomes[k] for k in sorted(run.outcomes)]
            # The documents claimed and not finished stay `running`, which the next run never skips.
            reason = (f"stopped at once after {run.live.files_done} of {len(files)} files; the files not "
                      "finished are indexed again when the job resumes (server start) or the folder is ingested again")
            interrupt_job(self.res.db, job_id, reason, totals={**run.live.snapshot(), "files_total": len(files)})
            raise SyncInterrupted(job_id, outcomes, len(files)) from None
        except BaseException as exc:
            self.parser.close()  # outstanding requests belong to this run
            fail_job(self.res.db, job_id, f"{type(exc).__name__}: {exc}")
            raise
        outcomes = [run.outcomes[k] for k in sorted(run.outcomes)]
        written = sum(o.chunks for o in outcomes if o.status == "done") + sum(o.status == "deleted" for o in outcomes)
        if written >= self.res.settings.ingest.optimize_min_points:
            started = time.perf_counter()
            self.res.store.optimize()
            run.seconds["optimize_s"] += time.perf_counter() - started
        totals: dict[str, float] = {}
        for o in outcomes:
            totals[o.status] = totals.get(o.status, 0) + 1
        totals["chunks"] = sum(o.chunks for o in outcomes if o.status == "done")
        totals["reused"] = sum(o.reused for o in outcomes if o.status == "done")
        if run.pii_kinds:
            totals.update({f"pii_masked_{kind}": run.pii_masked[kind] for kind in run.pii_kinds})
        totals["files_total"] = len(files)
        totals["ocr_pages"] = run.live.ocr_pages
        totals.update({k: round(v, 3) for k, v in run.seconds.items()})
        finish_sync_job(self.res.db, job_id, source_id=source_id, totals=totals)
        return outcomes

    def _source_of(self, path: Path, acl: AclManifest | None) -> tuple[Path, str, str]:
        """The source that `path` belongs to: `(root, source URI, kind)`; paths are relative to root.

        A file or sub-folder inside a registered folder source is synced as part of it: its
        relative paths, and therefore the manifest rules that match them, stay those of the source
        (ingesting `finance/report.pdf` alone must not reset it to the default ACL). Otherwise a
        folder starts a folder source, and a lone file a file source of its own (root: its folder).
        A new folder source takes over the sources inside it.

        Raises:
            InvalidRequestError: `acl` is given for a path inside a source (the manifest belongs to
                the whole source), or a new folder source would take over a source with a
                restrictive manifest while no `acl` says who may read those files.
        """
        known = list_sources(self.res.db)
        enclosing = enclosing_folder_source(known, path)
        if enclosing:
            if acl is not None:
                check_manifest_scope(known, path, remedy="ingest {root} with --acl to change who may read it")
            return enclosing.path, enclosing.uri, "folder"
        if not path.is_dir():
            return path.parent, path.as_uri(), "file"
        inner = [src for src in known if path in src.path.parents]
        restricted = sorted(
            str(src.path) for src in inner if src.acl_manifest and AclManifest.from_dict(src.acl_manifest) != AclManifest()
        )
        if restricted and acl is None:
            raise InvalidRequestError(
                f"{path} contains the source(s) {', '.join(restricted)}, whose ACL manifests restrict who may read "
                "them; pass an ACL manifest (--acl) for the whole folder, or ingest the inner sources on their own"
            )
        if inner:  # the new, outer source takes them over with its manifest
            take_over_sources(self.res.db, path, inner)
        return path, path.as_uri(), "folder"

    def _start_job(self, source_uri: str, kind: str, path: Path, acl: AclManifest | None, job_id: int | None) -> tuple[int, int, AclManifest]:
        source_id, stored = open_source(
            self.res.db, source_uri, kind, None if acl is None else acl.to_dict(), default=AclManifest().to_dict()
        )
        manifest = acl if acl is not None else AclManifest.from_dict(stored)
        return source_id, start_sync_job(self.res.db, job_id, source_id=source_id, path=str(path)), manifest

