"""What `assistant search` and `assistant ask` print, whoever found the answer (the running server
through `server_queries.hand_off`, or the Typer app's commands). Rich is imported only for the plain
(not `--json`) search listing."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_search_rows(rows: list[dict[str, Any]], *, as_json: bool) -> None:
    """Print search rows (`answering.hits.hit_rows`): a JSON array with `as_json`, else one numbered
    line per hit (source and score) with the first 200 characters of its text below."""
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    from assistant.cli.consoles import cli_console

    for i, row in enumerate(rows, start=1):
        cli_console().print(f"[bold]{i}.[/bold] {row['source']} [dim]({row['score']:.4f})[/dim]")
        cli_console().print("   " + " ".join(row["text"].split())[:200])


class AskPrinter:
    """Streams an answer's events to stdout, then prints its citations (`[n] source (page p)`)."""

    def __init__(self) -> None:
        self.citations: list[dict[str, Any]] = []

    def show(self, event: dict[str, Any]) -> None:
        """Print one streamed event (`{"event": "token"|"replace", "text"}`, `{"event": "citations", ...}`)."""
        if event["event"] == "token":
            sys.stdout.write(event["text"])
            sys.stdout.flush()
        elif event["event"] == "replace":  # declined after all: the answer so far is withdrawn
            sys.stdout.write("\n\n" + event["text"])
        elif event["event"] == "citations":
            self.citations.extend(event["citations"])

    def finish(self, result: dict[str, Any] | None, *, as_json: bool) -> None:
        """Print the whole answer `result` as JSON with `as_json`, else end the streamed one with its citations."""
        if as_json:
            print(json.dumps(result, ensure_ascii=False, indent=1))
            return
        print()
        for c in self.citations:
            print(f"[{c['n']}] {c['source']}" + (f" (page {c['page']})" if c.get("page") else ""))
