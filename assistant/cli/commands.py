"""`assistant ingest | search | ask | serve | jobs | sources` — the stable CLI contract (the Typer app;
the entry point `assistant.cli.main` hands a search or ask to a running server before importing it)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli import operations, serve_model
from assistant.cli.admin_audit import audit_source_change, install_admin_audit
from assistant.cli.compliance import audit_app, retention_app
from assistant.cli.consoles import cli_console, counted
from assistant.cli.errors import fail, report
from assistant.cli.finetune import finetune_app
from assistant.cli.keys import keys_app
from assistant.cli.opening import open_resources
from assistant.cli.sources import sources_app
from assistant.cli.users import groups_app, users_app
from assistant.core.errors import AssistantError, ConfigError, InvalidRequestError
from assistant.core.principals import ANONYMOUS, Principal

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Private RAG assistant.")
app.add_typer(users_app, name="users")
app.add_typer(groups_app, name="groups")
app.add_typer(keys_app, name="keys")
app.add_typer(sources_app, name="sources")
app.add_typer(finetune_app, name="finetune")
app.add_typer(audit_app, name="audit")
app.add_typer(retention_app, name="retention")
install_admin_audit({"users": users_app, "groups": groups_app, "keys": keys_app, "sources": sources_app, "finetune": finetune_app})
serve_model.register(app)
operations.register(app)  # doctor, backup, restore, migrate
console = cli_console(stderr=True)


def _principal(res, as_user: str | None) -> Principal:
    if as_user is None:
        return ANONYMOUS
    from assistant.core.db.identity import load_principal  # provided by the identity module

    return load_principal(res.db, as_user)


def _assistant_as(res, as_user: str | None):
    """The assistant composed on `res` and the principal the command acts as."""
    from assistant.composition import Assistant

    principal = _principal(res, as_user)  # an unknown --as user is reported before any model loads
    return Assistant.build(res), principal


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="a folder (recursively) or one file"),
    acl: Path | None = typer.Option(None, "--acl", help="YAML ACL manifest (default: everyone)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per file on stdout, progress lines on stderr"),
) -> None:
    """Ingest PATH: parse, chunk, embed and index every file; unchanged files are skipped.

    Shows a progress bar on a terminal, else a progress line on stderr every
    ASSISTANT_INGEST_PROGRESS_INTERVAL_S (30 s). When `assistant serve` holds the embedded vector store, the
    work is handed to it and followed until it ends. Exit status: 0 when every file was ingested or
    skipped for a stated reason (needs_ocr, encrypted, unsupported, too_large, empty), 1 when at
    least one file failed, 2 when the run could not start (a path that does not exist, a folder with no
    file to ingest among them: nothing is synced), 130 when SIGINT or SIGTERM stopped it at a
    file boundary, or a second one at once (the files done are kept, the job is `interrupted`; the same
    command indexes the rest). A sync handed to the server is stopped there the same way: the first
    signal asks the server to stop it at its next file boundary (`POST /api/local/jobs/{id}/stop`).
    """
    from assistant.auth.acl_manifest import AclManifest
    from assistant.cli.ingest_progress import IngestProgress, stop_on_signals
    from assistant.core.settings import get_settings
    from ingest.pipeline import Ingestor, SyncInterrupted

    def print_row(row: dict) -> None:
        if as_json:
            print(json.dumps({k: row[k] for k in ("source", "status", "reason", "chunks")}, ensure_ascii=False), flush=True)

    interrupted = None
    try:
        _refuse_a_missing_or_empty_folder(path)
        manifest = AclManifest.load(acl) if acl else None
        interval = get_settings().ingest.progress_interval_s
        with IngestProgress(console, as_json=as_json, line_interval_s=interval) as progress:
            try:  # Ctrl-C stops a sync of this process at a file boundary; one followed in the server at once
                with open_resources() as res, stop_on_signals(console) as stop:
                    ingestor = Ingestor(res)
                    try:
                        outcomes = ingestor.sync(
                            path, acl=manifest, on_file=lambda o: print_row(o.to_dict()), on_progress=progress.update,
                            stop=stop,
                        )
                        audit_source_change(res.db, "ingest", path, manifest.to_dict() if manifest else None)
                    except SyncInterrupted as exc:  # the files done are kept; the next run skips them
                        outcomes, interrupted = exc.outcomes, exc
                    finally:
                        ingestor.close()
            except AssistantError as exc:
                if exc.code != "store_locked":
                    raise
                outcomes, interrupted = _ingest_through_server(path, manifest, progress, print_row, exc)
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    except KeyboardInterrupt:  # a second signal outside the sync itself (loading the models, closing)
        console.print("stopped: run the same command again to index the rest", soft_wrap=True)
        raise typer.Exit(code=130) from None
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    acl_updated = sum(1 for o in outcomes if o.status == "skipped" and o.reason.endswith("ACL updated"))
    if not as_json:
        # The path on a line of its own: a table's title wraps at the table's width (fresh-user trial).
        cli_console().print(f"ingested {escape(str(path))}", soft_wrap=True)
        table = Table()
        table.add_column("status")
        table.add_column("files", justify="right")
        for status, n in sorted(counts.items()):
            table.add_row(status, str(n))
        table.add_row("chunks (new or changed files)", str(sum(o.chunks for o in outcomes if o.status == "done")))
        if acl_updated:  # "skipped" alone would read as "nothing changed" (fresh-user trial)
            table.add_row("ACL changed (unchanged files)", str(acl_updated))
        cli_console().print(table)
        problems = [o for o in outcomes if o.status not in ("done", "skipped", "deleted")]
        for o in problems[:50]:
            cli_console().print(f"  [yellow]{o.status}[/yellow] {escape(o.source)}: {escape(o.reason)}")
        for o in [o for o in outcomes if o.status == "done" and o.reason][:50]:  # OCR pages, rows past a limit
            cli_console().print(f"  [dim]note[/dim] {escape(o.source)}: {escape(o.reason)}")
    if manifest is not None:
        sources = [o.source for o in outcomes if "#" not in o.source]
        unmatched = manifest.unmatched(sources)
        if unmatched:  # a rule that matches nothing protects nothing: most likely a typo in its path
            err = cli_console(stderr=True)
            err.print(
                f"[yellow]warning[/yellow]: ACL rule path(s) {escape(', '.join(unmatched))} match no file of {escape(str(path))}, "
                f"so they restrict nothing (every file is readable by: {escape(', '.join(manifest.default))}); "
                "rule paths are relative to the folder ingested", soft_wrap=True,
            )
            if acl_updated:  # a typo in a rule that did match before opens those files up
                err.print(f"[yellow]warning[/yellow]: this run changed the ACL of {counted(acl_updated, 'indexed file')}: "
                          "check the rules, then ingest again with the corrected manifest", soft_wrap=True)
            for pattern in unmatched:  # the likeliest mistake: the path written from a sub-folder
                meant = manifest.rooted(pattern, sources)
                if meant:
                    err.print(f"  did you mean {escape(meant[0])!r}? it matches {meant[1]} file(s)", soft_wrap=True)
    if interrupted is not None:
        console.print(f"{interrupted}: run the same command again to index the rest", soft_wrap=True)
        raise typer.Exit(code=130)  # the shell's status of a command stopped by SIGINT
    if counts.get("failed"):
        raise typer.Exit(code=1)  # scripts and CI notice; the other files were ingested all the same


def _refuse_a_missing_or_empty_folder(path: Path) -> None:
    """Stop before any sync when the path does not exist, or the folder holds no file to ingest (a mount
    that failed, a wrong path, an ignore file that leaves everything out), so that nothing of an indexed
    source is deleted.

    Raises:
        InvalidRequestError: the path does not exist (said here, before a running server is asked); code
            `no_documents`, naming the folder and the files `.assistantignore` left out.
    """
    from assistant.core.settings import get_settings
    from ingest.pipeline import IGNORE_FILE, ignored_files, iter_files, product_folders

    folder = path.resolve()
    if not folder.exists():
        raise InvalidRequestError(f"{folder} does not exist (no such folder or file): nothing was synced")
    if not folder.is_dir():
        return
    leave_out = product_folders(get_settings())
    if next(iter(iter_files(folder, leave_out=leave_out)), None) is None:
        ignored = ignored_files(folder, leave_out=leave_out)
        raise InvalidRequestError(
            f"no documents found in {folder} ({ignored} file{'' if ignored == 1 else 's'} ignored by {IGNORE_FILE}); "
            "nothing was synced (to drop the documents of a source, use `assistant sources remove`)",
            code="no_documents",
        )


def _ingest_through_server(path: Path, manifest, progress, print_row, locked: AssistantError):
    """Hand the sync to the running `assistant serve` that holds the store; its outcomes per file, and
    a `SyncInterrupted` when the job ended `interrupted` (else None): the first Ctrl-C or SIGTERM asks
    the server to stop it at its next file boundary."""
    from assistant.cli.admin_audit import cli_principal
    from assistant.cli.ingest_progress import ingest_through_server, stop_on_signals
    from assistant.cli.local_server import server_url
    from assistant.core.settings import get_settings
    from ingest.pipeline import FileOutcome, SyncInterrupted

    settings = get_settings()
    if not settings.ingest.via_server:
        raise locked
    console.print(f"[dim]another process holds the vector store: the sync runs in the server at {server_url(settings)}[/dim]")
    items: list = []

    def on_item(item: dict) -> None:
        outcome = FileOutcome(item["path"], "", item["status"], item["reason"], item["chunks"], item["duration_s"])
        items.append(outcome)
        print_row(outcome.to_dict())

    def on_stop(job: dict) -> None:
        console.print(f"asked the server to stop sync job {job['id']} after the files in progress (it is {job['status']}); "
                      "the files done are kept", soft_wrap=True)

    with stop_on_signals(console) as stop:
        job = ingest_through_server(
            settings, str(path.resolve()), manifest.to_dict() if manifest else None,
            on_totals=progress.update, on_item=on_item, on_wait=progress.waiting,
            stop=stop, stopped_by=cli_principal().name, on_stop=on_stop,
        )
    if job["status"] == "interrupted":
        return items, SyncInterrupted(job["id"], items, (job.get("totals") or {}).get("files_total", len(items)))
    return items, None


@app.command()
def search(
    query: str,
    top_k: int = typer.Option(
        10, "--top-k", min=1, max=50,
        help="documents to list; a document's near-tied passages are listed together (ASSISTANT_CHUNKS_PER_DOCUMENT)",
    ),
    as_json: bool = typer.Option(False, "--json"),
    as_user: str | None = typer.Option(None, "--as", help="act as this user (default: sees only 'everyone' documents)"),
) -> None:
    """Search the chunks the caller may read, best first.

    When `assistant serve` runs for this data folder, the server searches (its models are loaded);
    otherwise this process does, loading the chat model only to translate a Chinese query."""
    from assistant.answering.hits import hit_rows
    from assistant.cli.query_output import print_search_rows
    from assistant.cli.server_queries import LocalServer, NoServer, search_through_server
    from assistant.core.questions import check_query
    from assistant.core.settings import get_settings

    try:
        check_query(query)
        try:
            rows = search_through_server(LocalServer.of(get_settings()), query, top_k=top_k, as_user=as_user)
        except NoServer:
            with open_resources(as_json=as_json) as res:
                assistant, principal = _assistant_as(res, as_user)
                if assistant.answerer.translates(query) and not as_json:
                    console.print("[dim]loading the chat model to translate the Chinese query (a running "
                                  "`assistant serve` has it loaded already)[/dim]", soft_wrap=True)
                rows = hit_rows(asyncio.run(assistant.answerer.search(query, principal=principal, top_k=top_k)))
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    print_search_rows(rows, as_json=as_json)


@app.command()
def ask(
    question: str,
    as_json: bool = typer.Option(False, "--json"),
    as_user: str | None = typer.Option(None, "--as", help="act as this user (default: sees only 'everyone' documents)"),
) -> None:
    """Answer QUESTION from the documents the caller may read, with citations.

    When `assistant serve` runs for this data folder, the server answers (its models are loaded)."""
    from assistant.cli.query_output import AskPrinter
    from assistant.cli.server_queries import LocalServer, NoServer, ask_through_server
    from assistant.core.questions import check_query
    from assistant.core.settings import get_settings

    printer = AskPrinter()
    try:
        check_query(question)
        try:
            server = LocalServer.of(get_settings())
            result = ask_through_server(server, question, as_user=as_user, on_event=None if as_json else printer.show)
        except NoServer:
            result = _ask_in_process(question, as_user=as_user, as_json=as_json, on_event=printer.show)
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    printer.finish(result, as_json=as_json)


def _ask_in_process(question: str, *, as_user: str | None, as_json: bool, on_event) -> dict | None:
    """`assistant ask` without a server: this process loads the models. Returns the answer's dict
    with `as_json`, else None after streaming its events (as `server_queries`' JSON lines) to `on_event`."""
    from assistant.answering.events import Citations, Done, Replace, Token
    from assistant.core.db.usage import record_usage

    with open_resources(as_json=as_json) as res:
        assistant, principal = _assistant_as(res, as_user)
        started = time.perf_counter()

        def counted(abstained: bool) -> None:  # in the quality view's usage, as `cli`
            record_usage(res.db, endpoint="cli", abstained=abstained, duration_s=time.perf_counter() - started)

        if as_json:
            result = asyncio.run(assistant.answerer.answer(question, principal=principal))
            counted(result.abstained)
            return result.to_dict()

        async def run() -> None:
            async for event in assistant.answerer.stream(question, principal=principal):
                if isinstance(event, Token | Replace):
                    on_event({"event": event.name, "text": event.text})
                elif isinstance(event, Citations):
                    on_event({"event": "citations", "citations": event.citations})
                elif isinstance(event, Done):
                    counted(event.abstained)

        asyncio.run(run())
    return None


@app.command()
def serve(
    host: str | None = typer.Option(None, "--host"),
    port: int | None = typer.Option(None, "--port"),
    workers: int = typer.Option(
        1, "--workers", min=1, max=64,
        help="API processes (needs a Qdrant server and PostgreSQL; the embedded default serves from one process)",
    ),
) -> None:
    """Serve the API and the web UI."""
    import uvicorn

    from assistant.auth.accounts import ensure_bootstrap_admin, list_users
    from assistant.auth.signing import signing_key
    from assistant.cli.local_server import announced_address
    from assistant.cli.opening import open_database
    from assistant.core.log_config import logging_dict
    from assistant.core.settings import get_settings

    settings = get_settings()
    if workers > 1 and (settings.storage.vector_store == "edge" or settings.resolved_database_url.startswith("sqlite")):
        fail(ConfigError(
            f"--workers {workers} needs ASSISTANT_VECTOR_STORE=qdrant with a server (ASSISTANT_QDRANT_URL) and "
            "ASSISTANT_DATABASE_URL on PostgreSQL: the embedded Qdrant Edge folder and SQLite file belong to one process"
        ))
    signing_key(settings)  # generated here, once, before any worker reads it
    given = settings.auth.bootstrap_admin_password
    with open_database() as db:
        password = ensure_bootstrap_admin(
            db, name=settings.auth.bootstrap_admin_name, password=given.get_secret_value() if given else None
        )
        admins = [u.name for u in list_users(db) if u.is_admin and not u.disabled]
    if password and not given:
        console.print(
            f"[bold]first admin created[/bold]: user [bold]{settings.auth.bootstrap_admin_name}[/bold], "
            f"password [bold]{password}[/bold] (shown only this once; change it with "
            f"`assistant users set-password {settings.auth.bootstrap_admin_name}`)",
            soft_wrap=True,
        )
    elif password:
        console.print(
            f"first admin [bold]{settings.auth.bootstrap_admin_name}[/bold] created with ASSISTANT_BOOTSTRAP_ADMIN_PASSWORD"
        )
    elif given:
        console.print(
            "note: ASSISTANT_BOOTSTRAP_ADMIN_PASSWORD was not used: the database already has accounts, and the first "
            "admin is created only on a database without any; make one with `assistant users add NAME --admin`",
            soft_wrap=True,
        )
    if not admins:  # accounts made before the first serve: none can manage the others (fresh-user trial)
        console.print(
            "[yellow]note[/yellow]: no administrator account: nobody can manage users, sources or models from the "
            "web app; make one with `assistant users add NAME --admin`",
            soft_wrap=True,
        )
    # One format for the product's loggers and uvicorn's: JSON lines with the request ID in production.
    log_config = logging_dict(settings, uvicorn=True)
    address = {"host": host or settings.server.host, "port": port or settings.server.port, "log_level": "info", "log_config": log_config,
               # Explicit, so that uvicorn's own default (trust X-Forwarded-For from 127.0.0.1) does not apply.
               "forwarded_allow_ips": settings.server.forwarded_allow_ips}
    if workers > 1:
        operations.prepare_multiprocess_metrics(settings)
    # The app is built by its factory from the environment (each process its own with several workers),
    # so that the CLI never imports the API: they are two faces of the same composition.
    with announced_address(settings, address["host"], address["port"]):
        uvicorn.run("assistant.api.app:create_app", factory=True, workers=workers if workers > 1 else None, **address)


@app.command()
def jobs(limit: int = typer.Option(20, "--limit"), as_json: bool = typer.Option(False, "--json")) -> None:
    """Recent ingestion jobs and their outcome (reads the SQL database only, so it works while the
    server holds the embedded vector store)."""
    from assistant.cli.opening import open_database
    from assistant.core.db.jobs import recent_jobs

    with open_database() as db:
        rows = [
            {"id": j.id, "kind": j.kind, "status": j.status, "reason": j.reason, "totals": j.totals,
             "created_at": j.created_at.isoformat(), "finished_at": j.finished_at.isoformat() if j.finished_at else None}
            for j in recent_jobs(db, limit)
        ]
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table("id", "kind", "status", "totals", "reason")
    for r in rows:
        table.add_row(str(r["id"]), r["kind"], r["status"], json.dumps(r["totals"]), (r["reason"] or "")[:60])
    cli_console().print(table)


from assistant.cli.evaluation import eval_command  # noqa: E402

app.command("eval")(eval_command)
from assistant.cli.reindex import reindex_command  # noqa: E402

app.command("reindex")(reindex_command)


def run() -> None:
    """The `assistant` command: `app`, with an error raised before any command could report it
    (settings read from the environment, for one) printed as every command prints its errors. With
    `--json`, a usage error (an unknown option, a value out of range) is the same one JSON line
    (`invalid_request`, exit status 2) instead of Typer's box."""
    as_json = "--json" in sys.argv[1:]
    try:
        if not as_json:
            app()
            return
        status = app(standalone_mode=False)
    except AssistantError as exc:
        report(exc, as_json=as_json)
        sys.exit(2)
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:
        # Typer's own copy of click raises its exceptions outside standalone mode; a usage error
        # (unknown option, bad value, missing argument) is the one with exit code 2.
        if getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message"):
            report(InvalidRequestError(exc.format_message()), as_json=True)
            sys.exit(2)
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    sys.exit(status if isinstance(status, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    run()
