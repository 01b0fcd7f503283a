"""The CLI's Rich consoles: one place that decides how output is laid out on a terminal and in a pipe."""

from __future__ import annotations

import os

from rich.console import Console

# Columns given to a console that is not a terminal (piped, redirected to a file), where Rich would
# otherwise wrap at 80: a table row, a file name or an error stays on one line for grep and scripts.
PIPED_WIDTH = 4096


def cli_console(*, stderr: bool = False) -> Console:
    """A Rich console on stdout (or stderr with `stderr=True`).

    On a terminal it takes the terminal's width, as Rich does. Elsewhere it is `PIPED_WIDTH` columns
    wide unless `COLUMNS` says otherwise, so lines are not broken at Rich's default of 80 columns.
    """
    console = Console(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPED_WIDTH
    return console


def counted(n: int, noun: str) -> str:
    """`n` and an English count noun, singular for one: `counted(1, "document")` -> "1 document",
    `counted(3, "chunk")` -> "3 chunks" (thousands separated)."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
