"""Re-index every source into a new collection for the configured embedding model, then switch the alias.

Readers keep the collection the alias named when they opened it (see `assistant.core.vectorstore.catalog`),
so search answers from the old collection, with the old model, for the whole re-index; a process
restarted after the switch opens the new one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from assistant.core.db.session import Database
from assistant.core.db.sources import list_sources
from assistant.core.errors import InvalidRequestError
from assistant.core.resources import Resources
from assistant.core.settings import Settings
from assistant.core.vectorstore import CollectionCatalog, open_catalog
from ingest.pipeline import Ingestor
from ingest.sync_run import FileOutcome


@dataclass
class ReindexResult:
    """What a re-index did: the alias, the physical collections before (`old`, None when nothing was
    indexed) and after (`new`), the embedding model and its dimension, the sources synced, file
    outcomes by status, the chunks written, and whether the old collection was dropped."""

    alias: str
    old: str | None
    new: str
    model: str
    dim: int
    sources: int
    files: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    old_dropped: bool = False

    def to_dict(self) -> dict:
        """The result as a JSON-serialisable dict."""
        return asdict(self)


def reindex(
    settings: Settings,
    *,
    catalog: CollectionCatalog | None = None,
    db: Database | None = None,
    keep_old: bool = False,
    on_source: Callable[[Path], None] | None = None,
    on_file: Callable[[FileOutcome], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    before_switch: Callable[[str], None] | None = None,
) -> ReindexResult:
    """Build a new physical collection with `settings.embedding_model` from every registered source
    (each with the ACL manifest stored with it), point the alias `settings.collection` at it, then
    drop the collection the alias named before (unless `keep_old`, or another process still has it
    open: Qdrant Edge only, reported as `old_dropped=False`).

    The live collection is never opened here, so this runs beside a serving process. Documents are
    re-embedded, not skipped: the new collection starts empty, so no document has its chunks there.

    Args:
        settings: the configuration, with the new embedding model.
        catalog: the engine's collections (default: opened from `settings`, closed at the end).
        db: the SQL database (default: opened and migrated from `settings`, disposed at the end).
        keep_old: keep the old physical collection after the switch.
        on_source: called with each source's path before it is synced.
        on_file / on_total: passed to `Ingestor.sync` for each source.
        before_switch: called with the new collection's name once it is complete, before the switch.

    Returns:
        The `ReindexResult`.

    Raises:
        InvalidRequestError: a registered source no longer exists (nothing is created then).
        ConflictError: the new collection would mix embeddings (another model or dimension).
        Any error of a sync: the new collection is dropped and the alias left as it was.
    """
    own_catalog, own_db = catalog is None, db is None
    if db is None:
        settings.ensure_dirs()
        db = Database(settings.resolved_database_url)
        db.migrate()
    catalog = catalog or open_catalog(settings)
    try:
        paths = [source.path for source in list_sources(db)]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise InvalidRequestError(
                f"cannot re-index: the source(s) {', '.join(missing)} no longer exist; restore them first, "
                "or their documents would vanish from search"
            )
        alias, model = settings.storage.collection, settings.embedding.model
        old = catalog.resolve(alias)
        new = catalog.new_name(alias, model)
        outcomes, dim = _fill(Resources(settings=settings, db=db, store=catalog.open(new, model=model)),
                              paths, catalog=catalog, on_source=on_source, on_file=on_file, on_total=on_total)
        try:
            if before_switch is not None:
                before_switch(new)
            catalog.switch_alias(alias, new)
        except BaseException:
            catalog.drop(new)
            raise
        dropped = old is not None and not keep_old and catalog.drop(old)
        return ReindexResult(
            alias=alias, old=old, new=new, model=model, dim=dim, sources=len(paths),
            files=dict(Counter(o.status for o in outcomes)),
            chunks=sum(o.chunks for o in outcomes if o.status == "done"), old_dropped=bool(dropped),
        )
    finally:
        if own_catalog:
            catalog.close()
        if own_db:
            db.dispose()


def _fill(
    res: Resources,
    paths: list[Path],
    *,
    catalog: CollectionCatalog,
    on_source: Callable[[Path], None] | None,
    on_file: Callable[[FileOutcome], None] | None,
    on_total: Callable[[int], None] | None,
) -> tuple[list[FileOutcome], int]:
    """Sync every source into `res.store` (a new collection); drop it again if anything breaks."""
    outcomes: list[FileOutcome] = []
    try:
        ingestor = Ingestor(res)  # creates the collection, recording the model
        try:
            for path in paths:
                if on_source is not None:
                    on_source(path)
                outcomes += ingestor.sync(path, on_file=on_file, on_total=on_total)
        finally:
            ingestor.close()
    except BaseException:
        res.store.close()
        catalog.drop(res.store.collection)  # the alias never named it
        raise
    res.store.close()
    return outcomes, ingestor.embedder.dim
