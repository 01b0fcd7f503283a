"""The collections of one engine and the alias that names the live one (re-indexing without downtime).

`settings.collection` (default `chunks`) is an alias. Each physical collection has a versioned name,
`<alias>-<model slug>-<n>`, and records the embedding model (name and dimension) that built it. A
re-index fills a new physical collection, then points the alias at it in one step; a process that
opened the alias before keeps its physical collection until it restarts. A collection named exactly
like the alias, with no alias record (made before aliases existed), is taken as the live one.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from assistant.core.errors import ConfigError, ConflictError
from assistant.core.vectorstore.base import VectorStore

SLUG_CHARS = 40  # longest model slug in a collection name


@dataclass(frozen=True)
class EmbeddingRecord:
    """The embedding model that built a collection: `model` (None for collections made before models
    were recorded) and `dim`, the dimension of its dense vectors."""

    model: str | None
    dim: int


def model_slug(model: str) -> str:
    """A collection-name-safe short form of an embedding model name:
    `builtin:all-MiniLM-L6-v2` -> `all-minilm-l6-v2`, `/models/bge-m3/` -> `bge-m3`."""
    tail = PurePosixPath(model.split(":", 1)[-1].rstrip("/")).name or model
    return re.sub(r"[^a-z0-9]+", "-", tail.lower()).strip("-")[:SLUG_CHARS].strip("-") or "model"


class CollectionCatalog(abc.ABC):
    """The physical collections of one engine, their recorded embedding models, and the aliases."""

    @abc.abstractmethod
    def resolve(self, alias: str) -> str | None:
        """The physical collection `alias` names: its alias target, else a collection named exactly
        `alias` (made before aliases), else None (nothing indexed yet)."""

    @abc.abstractmethod
    def names(self) -> list[str]:
        """Every physical collection."""

    @abc.abstractmethod
    def record(self, name: str) -> EmbeddingRecord | None:
        """The embedding model recorded for collection `name`; None when the collection does not exist."""

    @abc.abstractmethod
    def open(self, name: str, *, model: str | None, alias: str | None = None, own: bool = False) -> VectorStore:
        """A store on physical collection `name` written with embedding model `model`.

        Args:
            name: physical collection (created by the store's `ensure_collection` if missing).
            model: embedding model name recorded on creation and checked on an existing collection.
            alias: when given and it names nothing yet, the alias is pointed at `name` as soon as
                the collection is created (a first ingestion).
            own: the store takes over the catalog's connection and closes it; use the catalog no more.
        """

    @abc.abstractmethod
    def switch_alias(self, alias: str, name: str) -> None:
        """Point `alias` at collection `name`, atomically for readers that resolve the alias.

        A collection named exactly `alias` (made before aliases) is in the way: the Qdrant server
        drops it first (aliases and collections share one namespace); Qdrant Edge keeps it.
        """

    @abc.abstractmethod
    def drop(self, name: str) -> bool:
        """Delete collection `name`. Returns False when it is kept because another process has it open.

        Raises:
            ConflictError: an alias still names it.
        """

    def close(self) -> None:  # noqa: B027 - optional hook: a no-op for a catalog without a connection
        """Release the catalog's connection, if it has one."""

    def new_name(self, alias: str, model: str) -> str:
        """A name no collection has: `<alias>-<model slug>-<n>`, n one above the highest in use."""
        pattern = re.compile(re.escape(alias) + r"-.+-(\d+)")
        used = [int(m.group(1)) for c in self.names() if (m := pattern.fullmatch(c))]
        return f"{alias}-{model_slug(model)}-{max(used, default=0) + 1}"

    def open_live(self, alias: str, *, model: str) -> VectorStore:
        """The store the service reads and writes: the collection `alias` names now (pinned for the
        life of the store), or, when nothing is indexed yet, a new versioned one that the alias will
        name once created. The store owns the catalog's connection.

        Raises:
            ConfigError: the live collection was built with another embedding model than `model`
                (the service would embed questions with the wrong model).
        """
        name = self.resolve(alias)
        if name is None:
            return self.open(self.new_name(alias, model), model=model, alias=alias, own=True)
        record = self.record(name)
        if record is not None and record.model and record.model != model:
            raise ConfigError(
                f"collection '{alias}' (physical collection '{name}') was built with the embedding model "
                f"{record.model!r} ({record.dim}-d), but ASSISTANT_EMBEDDING_MODEL={model!r}: run "
                f"`assistant reindex` to rebuild it with the new model (search keeps working meanwhile), "
                f"or set ASSISTANT_EMBEDDING_MODEL back to {record.model!r}"
            )
        return self.open(name, model=model, own=True)

    def _claim_on_create(self, alias: str | None, name: str) -> Callable[[], None] | None:
        """For a store's `on_create`: point `alias` at `name` if it names nothing else yet."""
        if alias is None:
            return None

        def claim() -> None:
            if self.resolve(alias) in (None, name):
                self.switch_alias(alias, name)

        return claim

    def _refuse_aliased(self, name: str, aliases: dict[str, str]) -> None:
        named_by = sorted(a for a, target in aliases.items() if target == name)
        if named_by:
            raise ConflictError(
                f"collection '{name}' is still named by the alias(es) {', '.join(named_by)}: switch them first"
            )
