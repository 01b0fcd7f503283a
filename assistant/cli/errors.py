"""How every CLI command reports an `AssistantError`: one line on stderr, exit status 2.

Typer and Rich are imported when used: a search handed to a running server reports the server's
error through `report` without loading either for a `--json` caller (`server_queries.hand_off`).
"""

from __future__ import annotations

import json
import sys
from typing import NoReturn

from assistant.core.errors import AssistantError, ConfigError


def fail(exc: AssistantError, *, as_json: bool = False) -> NoReturn:
    """Print `exc` on stderr (`report`) and exit with status 2.

    Raises:
        typer.Exit: always, with code 2.
    """
    import typer  # when failing: see the module docstring

    report(exc, as_json=as_json)
    raise typer.Exit(code=2) from exc


def report(exc: AssistantError, *, as_json: bool = False) -> None:
    """Print `exc` on stderr as every command reports its errors.

    Args:
        exc: the error; its stable `code` and its `message` are printed.
        as_json: the command was asked for JSON: print `{"error": {"code", "message"}}` (the HTTP
            API's shape) as one line, so that a script parses failures as it parses results.
    """
    if as_json:
        print(json.dumps({"error": {"code": exc.code, "message": exc.message}}, ensure_ascii=False), file=sys.stderr)
    else:
        from rich.markup import escape

        from assistant.cli.consoles import cli_console

        cli_console(stderr=True).print(f"[red]error[/red] ({exc.code}): {escape(exc.message)}", soft_wrap=True)


def through_the_api(exc: AssistantError, route: str) -> AssistantError:
    """`exc`, or, when a running server owns the embedded vector store (`store_locked`), the same error
    naming the API route (`route`, e.g. `POST /api/retention/run`) that an admin uses while it runs."""
    if exc.code != "store_locked":
        return exc
    return ConfigError(
        f"{exc.message}. While `assistant serve` runs, an admin does this through its API instead: {route}",
        code="store_locked",
    )
