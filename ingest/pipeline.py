"""The ingestion pipeline: sync a folder (or one file) into the collection, one job row per run.

Invariants kept here: chunk IDs are deterministic (document ID + position + chunk hash), so a re-run
changes nothing; an updated file replaces its chunks (new ones upserted first, stale ones deleted
after, so that a run cut short by a crash converges when it is run again); a file deleted at the
source loses its chunks; a bad file fails alone with a reason.

Throughput: files are parsed and chunked in a child process (`ingest.isolated_parse`, which also
enforces the per-file time and memory limits) while this process embeds; chunks of several files are
embedded in one call of `embedding_batch_chunks` chunks; a text embedded before (same file at another
path, unchanged paragraphs of an edited file) reuses its vector from the `EmbeddingCache`.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable

from sqlalchemy import delete, select, update

from assistant.core.db.models import Document, Job, JobItem, Source, utcnow
from assistant.core.errors import InvalidRequestError
from assistant.core.resources import Resources
from assistant.core.acl_manifest import AclManifest
from ingest.embedding_cache import EmbeddingCache
from ingest.ids import NAMESPACE, chunk_id, document_id
from ingest.isolated_parse import IsolatedParser
from ingest.sync_run import FileOutcome, SyncRun, detect_lang

__all__ = ["NAMESPACE", "FileOutcome", "Ingestor", "chunk_id", "detect_lang", "document_id", "iter_files"]

DONE_STATES = {"done", "skipped"}


def iter_files(root: Path) -> Iterable[Path]:
    """Every regular file under `root`, sorted, hidden files and folders skipped."""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and not path.is_symlink():
            yield path


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
        self.batch_chunks = settings.embedding_batch_chunks
        self.parser = IsolatedParser(
            tokenizer_path=embedder.path,
            max_tokens=embedder.max_text_tokens,
            chunk_tokens=settings.chunk_size_tokens or getattr(embedder, "chunk_tokens", 0),
            overlap_tokens=settings.chunk_overlap_tokens,
            timeout_s=settings.parse_timeout_s,
            memory_limit_bytes=settings.parse_memory_limit_bytes,
        )
        # One thread: batches are embedded in order while this thread writes the previous one.
        self.embed_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assistant-embed")
        self.cache = EmbeddingCache(
            settings.data_dir / "embedding-cache.sqlite", model=embedder.name, dim=embedder.dim,
            max_vectors=settings.embedding_cache_max_vectors,
        )
        resources.store.ensure_collection(embedder.dim)

    def close(self) -> None:
        """Stop the parser process and the embedding thread, close the embedding cache."""
        self.parser.close()
        self.embed_thread.shutdown(wait=True)
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

        Raises:
            InvalidRequestError: `path` does not exist.
        """
        path = Path(path).resolve()
        if not path.exists():
            raise InvalidRequestError(f"ingest path {path} does not exist")
        if _printable(str(path)) != str(path):
            raise InvalidRequestError(f"ingest path {_printable(str(path))} is not valid UTF-8: rename it first")
        files = list(iter_files(path)) if path.is_dir() else [path]
        root, source_uri, kind = self._source_of(path, acl)
        source_id, job_id, manifest = self._start_job(source_uri, kind, path, acl, job_id)
        # A file name that is not UTF-8 keeps its bytes on disk and gets an escaped name (`bad\xffname.md`)
        # in outcomes, SQL and payloads, so that it is ingested like any other instead of breaking the run.
        rels = [_printable(f.relative_to(root).as_posix()) for f in files]
        run = SyncRun(self, job_id, source_id, on_file)
        try:
            item_ids = self._create_items(job_id, rels)
            if on_total:
                on_total(len(files))
            with tempfile.TemporaryDirectory(prefix="assistant-attachments-") as scratch:
                run.scratch = Path(scratch)
                for index, (file, rel) in enumerate(zip(files, rels)):
                    run.start(file, rel, file.resolve().as_uri(), (index, ""), manifest.acl_for(rel), 0, item_ids[index])
                    while self.parser.pending > 1:  # keep one file parsing while this process embeds
                        run.collect()
                while self.parser.pending:
                    run.collect()
                run.drain()
            if path.is_dir():
                run.delete_missing(under="" if path == root else path.relative_to(root).as_posix() + "/")
        except BaseException as exc:
            self.parser.close()  # outstanding requests belong to this run
            with self.res.db.session() as session:
                job = session.get(Job, job_id)
                job.status, job.finished_at, job.reason = "failed", utcnow(), f"{type(exc).__name__}: {exc}"
            raise
        outcomes = [run.outcomes[k] for k in sorted(run.outcomes)]
        written = sum(o.chunks for o in outcomes if o.status == "done") + sum(o.status == "deleted" for o in outcomes)
        if written >= self.res.settings.optimize_min_points:
            started = time.perf_counter()
            self.res.store.optimize()
            run.seconds["optimize_s"] += time.perf_counter() - started
        with self.res.db.session() as session:
            job = session.get(Job, job_id)
            totals: dict[str, float] = {}
            for o in outcomes:
                totals[o.status] = totals.get(o.status, 0) + 1
            totals["chunks"] = sum(o.chunks for o in outcomes if o.status == "done")
            totals["reused"] = sum(o.reused for o in outcomes if o.status == "done")
            totals.update({k: round(v, 3) for k, v in run.seconds.items()})
            job.status, job.finished_at, job.totals, job.reason = "done", utcnow(), totals, ""
            session.get(Source, source_id).last_synced_at = utcnow()
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
        with self.res.db.session() as session:
            known = [(src.path, src.kind, src.acl_manifest) for src in session.scalars(select(Source))]
        enclosing = [root for root, kind, _ in known if kind == "folder" and (path == root or root in path.parents)]
        if enclosing:
            root = max(enclosing, key=lambda r: len(r.parts))  # the innermost source
            if acl is not None and root != path:
                raise InvalidRequestError(
                    f"{path} lies inside the source {root}, whose ACL manifest covers it; "
                    f"ingest {root} with --acl to change who may read it"
                )
            return root, root.as_uri(), "folder"
        if not path.is_dir():
            return path.parent, path.as_uri(), "file"
        inner = [(root, manifest) for root, _, manifest in known if path in root.parents]
        restricted = sorted(str(root) for root, manifest in inner if manifest and AclManifest.from_dict(manifest) != AclManifest())
        if restricted and acl is None:
            raise InvalidRequestError(
                f"{path} contains the source(s) {', '.join(restricted)}, whose ACL manifests restrict who may read "
                "them; pass an ACL manifest (--acl) for the whole folder, or ingest the inner sources on their own"
            )
        if inner:
            with self.res.db.session() as session:  # the new, outer source takes them over with its manifest
                outer = session.scalar(select(Source).where(Source.uri == path.as_uri()))
                if outer is None:
                    outer = Source(kind="folder", uri=path.as_uri())
                    session.add(outer)
                    session.flush()
                olds = session.scalars(select(Source.id).where(Source.uri.in_([r.as_uri() for r, _ in inner]))).all()
                session.execute(update(Document).where(Document.source_id.in_(olds)).values(source_id=outer.id))
                session.execute(update(Job).where(Job.source_id.in_(olds)).values(source_id=outer.id))
                session.execute(delete(Source).where(Source.id.in_(olds)))
        return path, path.as_uri(), "folder"

    def _start_job(self, source_uri: str, kind: str, path: Path, acl: AclManifest | None, job_id: int | None) -> tuple[int, int, AclManifest]:
        manifest = acl or AclManifest()
        with self.res.db.session() as session:
            source = session.scalar(select(Source).where(Source.uri == source_uri))
            if source is None:
                source = Source(kind=kind, uri=source_uri)
                session.add(source)
                session.flush()
            if acl is not None or source.acl_manifest is None:
                source.acl_manifest = manifest.to_dict()
            else:
                manifest = AclManifest.from_dict(source.acl_manifest)
            if job_id is None:
                job = Job(kind="sync", source_id=source.id, params={"path": str(path)})
                session.add(job)
                session.flush()
                job_id = job.id
            job = session.get(Job, job_id)
            job.source_id = source.id
            job.status, job.started_at, job.finished_at = "running", utcnow(), None
            job.attempts = (job.attempts or 0) + 1
            return source.id, job_id, manifest

    def _create_items(self, job_id: int, rels: list[str]) -> list[int]:
        with self.res.db.session() as session:
            # A resumed job starts its items afresh: the files finished before the crash are skipped fast.
            session.execute(delete(JobItem).where(JobItem.job_id == job_id))
            items = [JobItem(job_id=job_id, path=rel, status="queued") for rel in rels]
            session.add_all(items)
            session.flush()
            return [item.id for item in items]
