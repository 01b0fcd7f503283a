"""Backup and restore of one deployment: SQL data, the vector collection, and the files they refer to.

A backup is a folder: `manifest.json` (written last: a folder without it is incomplete), the SQL data
(`database.sqlite` through SQLite's online backup API, or `database.pgdump` from `pg_dump -Fc`), the
vectors (`qdrant-edge/`, the embedded store's folder copied with its writes held; or
`qdrant/<collection>.snapshot` from the Qdrant server's snapshot API), `files/<role>/` for each folder
of `data_folders` (uploaded documents, helpdesk resolutions, finetune datasets and adapters, the
adapters volume). Left out: the model cache (`models/`), the embedding cache, logs, `prometheus/` and
earlier backups, which are rebuilt or fetched again, and `secret-key`, a secret that belongs in the
operator's secret store rather than in backup storage (without it, a restored deployment generates a
new one and people sign in again; nothing stored depends on it).

Taken while the service runs, in this order: the database (SQLite's backup API and pg_dump read one
consistent snapshot), the vectors (consistent in themselves), then the files. A document is stored as a
file before its row is written and its row is deleted before its file, so every file the database copy
refers to is still there when the files are copied (one deleted in between is the exception: its row
and chunks come back without it, and its download answers "not found" until it is deleted again). An
ingestion running in between may leave a document's SQL row and its chunks one version apart; the next
sync of its source repairs that (ingestion is idempotent, ARCHITECTURE.md invariant 2).

Restore puts each folder back where the target's settings place it; when that is another path than
the backup's (another data folder), `relocate` rewrites the paths, URIs and document IDs that the
database and the index hold for those files.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import httpx
from sqlalchemy.engine import make_url

from assistant import __version__
from assistant.core.db.schema import database_revisions
from assistant.core.db.session import Database
from assistant.core.errors import ConfigError
from assistant.core.resources import Resources
from assistant.core.settings import Settings
from assistant.core.vectorstore.edge import take_owner_lock
from assistant.core.vectorstore.factory import open_catalog
from assistant.operations.relocate import Move, relocate

MANIFEST = "manifest.json"
FORMAT = 2
READABLE_FORMATS = (1, 2)  # format 1: no `files/`, an `adapters/` folder copied from DATA_DIR/adapters
ADAPTERS = "adapters"
FILES = "files"


def data_folders(settings: Settings) -> dict[str, Path]:
    """The folders of files that the database and the index refer to, by role (the name of their copy
    under `files/` in a backup), as absolute paths:

    - `uploads`: uploaded documents (`uploads_dir`; each one's source, document and download);
    - `helpdesk-resolutions`: resolved tickets written as documents and indexed (`helpdesk_resolutions_dir`);
    - `finetune`: dataset snapshots, adapters and run logs that the adapter registry names (`finetune_dir`);
    - `adapters`: DATA_DIR/adapters, the volume the model server reads published adapters from;
    - `tables`: the documents' queryable tables (`tables_dir`, one duckdb file per document, each
      replaced by an atomic rename, so a copy is never half-written; `.staging/` holds a parse's scratch).

    Raises:
        ConfigError: one of them is the data folder or holds it (copying or replacing it would take
            the database, the vectors and the backups with it).
    """
    folders = {"uploads": settings.resolved_uploads_dir.resolve(), "helpdesk-resolutions": settings.resolutions_dir.resolve(),
               "finetune": settings.finetune_path.resolve(), ADAPTERS: (settings.storage.data_dir / ADAPTERS).resolve(),
               "tables": settings.tables_dir.resolve()}
    data_dir = settings.storage.data_dir.resolve()
    for role, folder in folders.items():
        if data_dir == folder or folder in data_dir.parents:
            raise ConfigError(f"the {role} folder {folder} is the data folder {data_dir} or holds it: give it a folder of its own")
    return folders


def copy_folder(src: Path, dest: Path) -> int:
    """Copy the files under `src` into `dest` (created), keeping times and modes; returns the files copied.

    Made for folders that a running service writes into: a file or folder deleted during the copy is
    left out instead of failing it (`os.walk` skips a folder it can no longer list), and symbolic links
    are copied as links, never followed.
    """
    copied = 0
    for folder, dirs, files in os.walk(src):
        rel = Path(folder).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            try:
                shutil.copy2(os.path.join(folder, name), dest / rel / name, follow_symlinks=False)
            except FileNotFoundError:
                continue
            copied += 1
    return copied


def _libpq(url: str) -> tuple[list[str], dict[str, str]]:
    """`pg_dump`/`pg_restore` connection arguments and environment for a SQLAlchemy PostgreSQL URL (the
    password travels in PGPASSWORD, never on a command line that `ps` shows)."""
    parsed = make_url(url)
    args = ["--dbname", parsed.database or "postgres", "--host", parsed.host or "127.0.0.1",
            "--port", str(parsed.port or 5432)]
    if parsed.username:
        args += ["--username", parsed.username]
    env = dict(os.environ)
    if parsed.password:
        env["PGPASSWORD"] = parsed.password
    return args, env


def _pg_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ConfigError(f"{name} is not installed: install the PostgreSQL client (e.g. apt-get install postgresql-client)")
    return path


def copy_sparse(src: Path, dest: Path) -> None:
    """Copy the folder `src` to `dest` (which must not exist), keeping files' holes: Qdrant preallocates
    its memory-mapped files (a 900-chunk collection is 185 MiB long and 1.5 MiB on disk), which a plain
    copy would write out in full. GNU `cp --sparse=always` where present, else `shutil.copytree`."""
    cp = shutil.which("cp")
    if cp is not None:
        done = subprocess.run([cp, "-a", "--sparse=always", str(src), str(dest)], capture_output=True, text=True)
        if done.returncode == 0:
            return
        shutil.rmtree(dest, ignore_errors=True)  # a cp without GNU options: fall back
    shutil.copytree(src, dest)


def backup_database(url: str, dest: Path) -> str:
    """Copy the database at `url` into `dest`; returns the file name written.

    SQLite: the online backup API (consistent while others write). PostgreSQL: `pg_dump -Fc`, one
    transaction-consistent snapshot (https://www.postgresql.org/docs/current/app-pgdump.html).

    Raises:
        ConfigError: another database kind, or pg_dump missing or failing.
    """
    if url.startswith("sqlite:///"):
        target = dest / "database.sqlite"
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as source, closing(sqlite3.connect(target)) as copy:
            source.backup(copy)
        return target.name
    if url.startswith("postgresql"):
        target = dest / "database.pgdump"
        args, env = _libpq(url)
        done = subprocess.run([_pg_tool("pg_dump"), "-Fc", "--no-owner", "--file", str(target), *args],
                              env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise ConfigError(f"pg_dump failed with status {done.returncode}: {done.stderr.strip()[:500]}")
        return target.name
    raise ConfigError(f"backup supports SQLite and PostgreSQL, not {make_url(url).get_backend_name()}")


def backup_vectors(resources: Resources, dest: Path) -> dict:
    """Copy the live vector collection into `dest`; returns its manifest entry.

    Raises:
        ConfigError: qdrant-client's local mode (no snapshot API: stop the process and copy its folder).
    """
    settings, store = resources.settings, resources.store
    if settings.storage.vector_store == "edge":
        with store.writes_paused():
            if settings.edge_path.exists():
                copy_sparse(settings.edge_path, dest / "qdrant-edge")
        return {"kind": "edge", "folder": "qdrant-edge"}
    if settings.storage.qdrant_url is None:
        raise ConfigError("backup of qdrant-client's local mode (ASSISTANT_QDRANT_PATH) is not supported: "
                          "stop the process and copy the folder")
    name = store.collection if store.client.collection_exists(store.collection) else None
    entry = {"kind": "qdrant", "collection": name, "alias": settings.storage.collection, "file": None}
    if name is None:
        return entry
    snapshot = store.client.create_snapshot(collection_name=name, wait=True)
    folder = dest / "qdrant"
    folder.mkdir()
    url = f"{settings.storage.qdrant_url.rstrip('/')}/collections/{quote(name, safe='')}/snapshots/{quote(snapshot.name, safe='')}"
    try:
        with httpx.stream("GET", url, headers=_qdrant_headers(settings), timeout=settings.llm.request_timeout_s) as response:
            response.raise_for_status()
            with open(folder / f"{name}.snapshot", "wb") as out:
                for block in response.iter_bytes(1 << 20):
                    out.write(block)
    finally:
        store.client.delete_snapshot(collection_name=name, snapshot_name=snapshot.name, wait=True)
    entry["file"] = f"qdrant/{name}.snapshot"
    return entry


def _qdrant_headers(settings: Settings) -> dict[str, str]:
    return {"api-key": settings.storage.qdrant_api_key.get_secret_value()} if settings.storage.qdrant_api_key else {}


def take_backup(resources: Resources, dest: Path) -> dict:
    """Back up the deployment that `resources` serve into the new or empty folder `dest`.

    Returns:
        The manifest (also written to `dest/manifest.json`): format, version, time, schema revisions,
        the database file, the vectors' entry, the data folder, per role of `data_folders` its path and
        the number of files copied (None: the folder did not exist), seconds taken.

    Raises:
        ConfigError: `dest` is not empty, or a part cannot be copied (see `backup_database`).
    """
    started = time.perf_counter()
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise ConfigError(f"backup folder {dest} is not empty: choose a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    settings = resources.settings
    manifest = {
        "format": FORMAT, "version": __version__, "created_at": datetime.now(UTC).isoformat(),
        "schema_revisions": sorted(database_revisions(resources.db)),
        "database": backup_database(settings.resolved_database_url, dest),
        "vectors": backup_vectors(resources, dest),
    }
    manifest["data_dir"] = str(settings.storage.data_dir.resolve())
    manifest["folders"] = {}
    for role, folder in data_folders(settings).items():
        files = copy_folder(folder, dest / FILES / role) if folder.is_dir() else None
        manifest["folders"][role] = {"path": str(folder), "files": files}
    manifest["seconds"] = round(time.perf_counter() - started, 3)
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def read_manifest(src: Path) -> dict:
    """The manifest of the backup in `src`.

    Raises:
        ConfigError: no manifest (not a backup, or an incomplete one) or another format.
    """
    path = Path(src) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{src} holds no {MANIFEST}: not a backup, or one that did not finish")
    manifest = json.loads(path.read_text())
    if manifest.get("format") not in READABLE_FORMATS:
        raise ConfigError(f"{path} has format {manifest.get('format')!r}; this release reads formats {READABLE_FORMATS}")
    return manifest


def _refuse_non_empty(settings: Settings, *, force: bool) -> None:
    """Restore writes only where nothing would be replaced, unless `force`: no SQLite file, no Edge
    folder and none of `data_folders` with files in it (a server database and collection are checked
    as they are restored)."""
    if force:
        return
    url = settings.resolved_database_url
    candidates = [settings.edge_path, *data_folders(settings).values()]
    if url.startswith("sqlite:///"):
        candidates.append(Path(url.removeprefix("sqlite:///")))
    occupied = [p for p in candidates if p.is_file() or (p.is_dir() and any(p.iterdir()))]
    if occupied:
        raise ConfigError(
            f"the data folder {settings.storage.data_dir} already holds {', '.join(str(p) for p in occupied)}: restore into an "
            "empty ASSISTANT_DATA_DIR, or pass --force to replace what is there"
        )


def restore_database(src: Path, manifest: dict, url: str, *, force: bool) -> None:
    """Put the backed-up SQL data into the database at `url` (the same kind it was taken from).

    Raises:
        ConfigError: a kind mismatch, a non-empty PostgreSQL database without `force`, pg_restore failing.
    """
    name = manifest["database"]
    if name.endswith(".sqlite"):
        if not url.startswith("sqlite:///"):
            raise ConfigError(f"the backup holds a SQLite database; ASSISTANT_DATABASE_URL points at {make_url(url).get_backend_name()}")
        target = Path(url.removeprefix("sqlite:///"))
        target.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        with closing(sqlite3.connect(src / name)) as source, closing(sqlite3.connect(target)) as copy:
            source.backup(copy)
        return
    if not url.startswith("postgresql"):
        raise ConfigError(f"the backup holds a PostgreSQL dump; ASSISTANT_DATABASE_URL points at {make_url(url).get_backend_name()}")
    db = Database(url)
    try:
        if database_revisions(db) and not force:
            raise ConfigError(f"the database {make_url(url).render_as_string(hide_password=True)} already holds a "
                              "schema: restore into an empty database, or pass --force to replace it")
    finally:
        db.dispose()
    args, env = _libpq(url)
    flags = ["--clean", "--if-exists"] if force else []
    done = subprocess.run([_pg_tool("pg_restore"), "--no-owner", "--exit-on-error", *flags, *args, str(src / name)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"pg_restore failed with status {done.returncode}: {done.stderr.strip()[:500]}")


def restore_vectors(src: Path, manifest: dict, settings: Settings, *, force: bool) -> None:
    """Put the backed-up collection back: the Edge folder, or the snapshot uploaded to the Qdrant server.

    Raises:
        ConfigError: the backup's store kind differs from the configured one, or the collection exists
            on the server and `force` is not given.
    """
    entry = manifest["vectors"]
    if entry["kind"] != settings.storage.vector_store:
        raise ConfigError(f"the backup holds a '{entry['kind']}' vector store; ASSISTANT_VECTOR_STORE is '{settings.storage.vector_store}'")
    if entry["kind"] == "edge":
        if (src / entry["folder"]).is_dir():
            if settings.edge_path.exists():
                shutil.rmtree(settings.edge_path)
            copy_sparse(src / entry["folder"], settings.edge_path)
        return
    if not entry.get("file"):
        return
    from assistant.core.vectorstore.server import ServerCatalog, connect  # noqa: PLC0415 - qdrant-client: ~1 s, only with a Qdrant server

    name = entry["collection"]
    client = connect(url=settings.storage.qdrant_url, path=None, api_key=_qdrant_headers(settings).get("api-key"),
                     timeout_s=settings.llm.request_timeout_s)
    try:
        if client.collection_exists(name) and not force:
            raise ConfigError(f"collection '{name}' exists on {settings.storage.qdrant_url}: pass --force to replace it")
        url = f"{settings.storage.qdrant_url.rstrip('/')}/collections/{quote(name, safe='')}/snapshots/upload?priority=snapshot&wait=true"
        with open(src / entry["file"], "rb") as snapshot:
            response = httpx.post(url, files={"snapshot": (Path(entry["file"]).name, snapshot)},
                                  headers=_qdrant_headers(settings), timeout=None)
        response.raise_for_status()
        ServerCatalog(client).switch_alias(settings.storage.collection, name)
    finally:
        client.close()


@contextmanager
def _edge_owner_locks(settings: Settings) -> Iterator[None]:
    """Hold the owner lock of every Qdrant Edge collection under the target's data folder while a
    restore replaces it, so that no server opens it meanwhile, and refuse when a running server holds
    one: replacing the files under a live server loses what it writes and breaks its shutdown.

    Raises:
        ConfigError(code="store_locked"): another process holds a collection of the target.
    """
    fds: list[int] = []
    try:
        if settings.storage.vector_store == "edge" and settings.edge_path.is_dir():
            for lock in sorted(settings.edge_path.glob(".*.lock")):
                fds.append(take_owner_lock(
                    lock, f"a running assistant process (e.g. `assistant serve`) holds the vector store in "
                    f"{settings.edge_path}: stop it before restoring into {settings.storage.data_dir}",
                ))
        yield
    finally:
        for fd in fds:
            os.close(fd)


def restore_backup(src: Path, settings: Settings, *, force: bool = False) -> dict:
    """Restore the backup in `src` into the deployment `settings` describe; the service must be stopped.

    The schema is then migrated to this release's head (a backup of an older release upgrades).

    Returns:
        The backup's manifest.

    Raises:
        ConfigError: not a backup; a non-empty target without `force`; a store or database kind that
            differs from the backup's; `store_locked` when a running process (`assistant serve`) holds
            the target's embedded vector store, `force` or not.
    """
    src = Path(src)
    manifest = read_manifest(src)
    with _edge_owner_locks(settings):
        _refuse_non_empty(settings, force=force)
        settings.ensure_dirs()
        restore_database(src, manifest, settings.resolved_database_url, force=force)
        restore_vectors(src, manifest, settings, force=force)
        moves = restore_files(src, manifest, settings)
    db = Database(settings.resolved_database_url)
    try:
        db.migrate()
        manifest["relocated"] = _relocate(db, settings, moves)
    finally:
        db.dispose()
    return manifest


def restore_files(src: Path, manifest: dict, settings: Settings) -> list[Move]:
    """Put the backed-up folders (`data_folders`) where `settings` place them, replacing what is
    there; returns the folders whose path differs from the backup's."""
    targets = data_folders(settings)
    moves = []
    for role, entry in manifest.get("folders", {}).items():
        if role not in targets or entry.get("files") is None:
            continue
        target = targets[role]
        if target.exists():
            shutil.rmtree(target)
        copy_folder(src / FILES / role, target)
        moves.append(Move(Path(entry["path"]), target))
    if manifest.get("adapters"):  # format 1
        target = targets[ADAPTERS]
        if target.exists():
            shutil.rmtree(target)
        copy_folder(src / ADAPTERS, target)
    return [m for m in moves if m.old != m.new]


def _relocate(db, settings: Settings, moves: list[Move]) -> dict[str, int]:
    """`relocate` the restored database and live collection for `moves`."""
    if not moves:
        return {}
    catalog = open_catalog(settings)
    try:
        name = catalog.resolve(settings.storage.collection)
        store = catalog.open(name, model=None) if name else None
        try:
            return relocate(db, store, moves, tables_dir=settings.tables_dir)
        finally:
            if store is not None:
                store.close()
    finally:
        catalog.close()
