"""The `assistant` command's entry point (`assistant`, `python -m assistant.cli.main`).

`assistant search` and `assistant ask` are first handed to a running `assistant serve` of the same
data folder with the standard library alone (`server_queries.hand_off`), so that they return in well
under 2 s; every other command, and a search or ask that no server takes, runs the Typer app
(`assistant.cli.commands`), which imports the settings, Typer and Rich, and the models when needed.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def run() -> None:
    """The `assistant` command: the hand-off of a search or ask to the running server, else the app
    (`commands.run`). Exit status as the app's (0, 1, 2, 130); 141 (128 + SIGPIPE) without a traceback when
    the reader of the output goes away (`assistant search --json | head -1`), as Python's documentation
    on SIGPIPE recommends: the rest of the output goes to /dev/null."""
    try:
        try:
            _run()
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)


def _run() -> None:
    if sys.argv[1:2] in (["search"], ["ask"]):
        from assistant.cli.server_queries import hand_off

        status = hand_off(sys.argv[1:])
        if status is not None:
            sys.exit(status)
    from assistant.cli.commands import run as run_app

    run_app()


def __getattr__(name: str) -> Any:
    """`from assistant.cli.main import app`: the Typer app, imported when asked for."""
    if name == "app":
        from assistant.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":  # pragma: no cover
    run()
