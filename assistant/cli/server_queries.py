"""`assistant search` and `assistant ask` handed to the running `assistant serve` of the same data folder.

The server has the embedding model, the reranker and the chat model loaded and holds the embedded
vector store, so the command returns in about a second instead of loading them (10-20 s of CPU, and
`store_locked` with the embedded store). It is found and admitted as `assistant ingest`'s hand-over
is: at `server_url` on loopback, with the local token derived from the data folder's signing key
(`signing.local_ingest_token`), and it checks that the command's data folder is its own; a server
of another data folder refuses (401), and the command then runs in process as when none answers.

`hand_off` does it for `assistant.cli.main` before the Typer app, the settings (pydantic) and httpx
are imported (about 1.5 s of a 2-core machine's start-up): it reads only the four settings that find
and admit the server, and leaves every case it does not handle exactly as the app would (options it
does not know, an invalid value, no server) to the app, which reports it. The HTTP calls go through
the standard library's `http.client` (loopback, plain HTTP, no proxy), for the app's commands too.
"""

from __future__ import annotations

import http.client
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from assistant.auth.signing import local_ingest_token, local_token, stored_key
from assistant.cli.local_server import server_url, server_url_at
from assistant.core.errors import AssistantError, ConfigError

if TYPE_CHECKING:
    from assistant.core.settings import Settings

CONNECT_TIMEOUT_S = 0.5  # loopback: a server that runs accepts at once; none costs this at most
ANSWER_TIMEOUT_S = 600.0
TOKEN_HEADER = "X-Assistant-Local-Token"  # as `assistant.api.routes.local_ingest` reads it
ENV_PREFIX = "assistant_"


class NoServer(Exception):
    """No server of this data folder answers: the command runs in process."""


class LocalServer(NamedTuple):
    """Where the server of a data folder answers, and how it is admitted.

    Attributes:
        base: its URL (`local_server.server_url`), e.g. `http://127.0.0.1:8000`.
        token: the local token (`signing.local_ingest_token`).
        data_dir: the command's data folder, resolved (the server refuses another one).
    """

    base: str
    token: str
    data_dir: str

    @classmethod
    def of(cls, settings: Settings) -> LocalServer:
        """The server of `settings`' data folder (the signing key file is made when missing)."""
        return cls(server_url(settings), local_ingest_token(settings), str(settings.storage.data_dir.resolve()))


_absent: set[LocalServer] = set()  # servers `hand_off` found not answering: the app does not try them again


def search_through_server(server: LocalServer, query: str, *, top_k: int, as_user: str | None) -> list[dict[str, Any]]:
    """The server's search rows (`answering.hits.hit_rows`) for `query`.

    Raises:
        NoServer: no server of this data folder answers.
        AssistantError: the server refused the search (its code and message: an unknown `--as` user,
            a blank query).
    """
    body = {"query": query, "top_k": top_k, "as_user": as_user, "data_dir": server.data_dir}
    connection = _connect(server)
    try:
        answer = _post(connection, server, "/api/local/search", body)
        text = answer.read()
    except (OSError, http.client.HTTPException) as exc:
        raise NoServer(str(exc)) from exc
    finally:
        connection.close()
    if answer.status != 200:
        raise _refusal(server, answer.status, text)
    return json.loads(text)


def ask_through_server(
    server: LocalServer, question: str, *, as_user: str | None, on_event: Callable[[dict[str, Any]], None] | None
) -> dict[str, Any] | None:
    """Have the server answer `question`.

    Args:
        on_event: called with each streamed event (`{"event": "token"|"replace", "text"}`,
            `{"event": "citations", "citations"}`); None: ask for the whole answer at once.

    Returns:
        The answer's dict (`Answer.to_dict()`) when `on_event` is None, else None.

    Raises:
        NoServer: no server of this data folder answers (nothing was asked).
        AssistantError: the server refused or failed the question (its code and message).
    """
    body = {"question": question, "as_user": as_user, "stream": on_event is not None, "data_dir": server.data_dir}
    connection = _connect(server)
    try:
        answer = _post(connection, server, "/api/local/ask", body)
        if answer.status != 200:
            raise _refusal(server, answer.status, answer.read())
        if on_event is None:
            return json.loads(answer.read())
        for event in _json_lines(answer):
            if event["event"] == "error":
                raise AssistantError(event["message"], code=event["code"])
            on_event(event)
    except (OSError, http.client.HTTPException) as exc:
        # It had the question: asking again in process would answer twice.
        raise AssistantError(
            f"the server at {server.base} stopped answering: {exc}", code="upstream_unavailable"
        ) from exc
    finally:
        connection.close()
    return None


def remove_through_server(server: LocalServer, path: str, *, by: str) -> dict[str, Any]:
    """Have the server remove source `path` (absolute) on behalf of `by` (`cli:NAME`); its
    `{"path", "documents", "chunks"}`.

    Raises:
        NoServer: no server of this data folder answers (nothing was removed).
        AssistantError: the server refused (`not_found`, `sync_running`) or stopped answering.
    """
    connection = _connect(server)
    try:
        answer = _post(connection, server, "/api/local/sources/remove", {"path": path, "by": by})
        text = answer.read()
    except (OSError, http.client.HTTPException) as exc:
        raise AssistantError(f"the server at {server.base} stopped answering: {exc}", code="upstream_unavailable") from exc
    finally:
        connection.close()
    if answer.status != 200:
        raise _refusal(server, answer.status, text)
    return json.loads(text)


def _connect(server: LocalServer) -> http.client.HTTPConnection:
    """An open connection to `server`, waiting `CONNECT_TIMEOUT_S` at most, then `ANSWER_TIMEOUT_S` per read.

    Raises:
        NoServer: nothing accepts the connection (remembered in `_absent`).
    """
    url = urlsplit(server.base)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=CONNECT_TIMEOUT_S)
    try:
        if server in _absent:
            raise ConnectionRefusedError(f"no server answered at {server.base} a moment ago")
        connection.connect()
    except OSError as exc:
        connection.close()
        _absent.add(server)
        raise NoServer(str(exc)) from exc
    assert connection.sock is not None
    connection.sock.settimeout(ANSWER_TIMEOUT_S)
    return connection


def _post(
    connection: http.client.HTTPConnection, server: LocalServer, path: str, body: dict
) -> http.client.HTTPResponse:
    headers = {"Content-Type": "application/json", TOKEN_HEADER: server.token}
    connection.request("POST", path, body=json.dumps(body).encode("utf-8"), headers=headers)
    return connection.getresponse()


def _refusal(server: LocalServer, status: int, text: bytes) -> AssistantError | NoServer:
    """What a non-2xx answer means: 401, a server of another data folder (it refuses this folder's
    token or path), else the server's error as the command reports it (`{"error": {"code", "message"}}`)."""
    if status == 401:
        return NoServer(f"the server at {server.base} serves another data folder")
    try:
        error = json.loads(text)["error"]
        return AssistantError(str(error["message"]), code=str(error["code"]))
    except (ValueError, KeyError, TypeError):
        shown = text.decode("utf-8", "replace")[:300]
        return AssistantError(f"the server answered {status}: {shown}", code="upstream_unavailable")


def _json_lines(answer: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    for line in answer:
        if line.strip():
            yield json.loads(line)


# -- the hand-off before the app -----------------------------------------------------------------
def hand_off(args: list[str]) -> int | None:
    """Run `assistant search ...` or `assistant ask ...` (`args`, without the program name) through the
    server of this data folder, printing what the app's command prints; the exit status, or None when
    the app must run the command (options or values it does not take as given, no server answering).

    Reads ASSISTANT_DATA_DIR, ASSISTANT_HOST, ASSISTANT_PORT and ASSISTANT_SECRET_KEY as the settings do
    (the environment, then `.env` of the working folder, names in any case); the other settings are
    the server's. A value the settings would refuse, or a data folder without its key file, is left
    to the app.
    """
    from assistant.core.questions import check_query

    parsed = _parse(args)
    server = _lean_server()
    if parsed is None or server is None:
        return None
    command, text, options = parsed
    try:
        check_query(text)
    except AssistantError:
        return None  # reported by the app
    from assistant.cli.query_output import AskPrinter, print_search_rows

    as_json = "--json" in options
    try:
        if command == "search":
            top_k = options.get("--top-k", "10")
            if not re.fullmatch(r"[0-9]{1,2}", top_k) or not 1 <= int(top_k) <= 50:
                return None
            print_search_rows(
                search_through_server(server, text, top_k=int(top_k), as_user=options.get("--as")), as_json=as_json
            )
        else:
            printer = AskPrinter()
            result = ask_through_server(
                server, text, as_user=options.get("--as"), on_event=None if as_json else printer.show
            )
            printer.finish(result, as_json=as_json)
    except NoServer:
        return None
    except AssistantError as exc:
        from assistant.cli.errors import report

        report(exc, as_json=as_json)
        return 2
    return 0


_OPTIONS = {"search": ("--top-k", "--as"), "ask": ("--as",)}  # options that take a value; `--json` is a flag


def _parse(args: list[str]) -> tuple[str, str, dict[str, str]] | None:
    """(command, query, options given) of `search QUERY [--top-k K] [--as USER] [--json]` or `ask
    QUESTION [--as USER] [--json]`; None for anything else (`--help`, `--`, an unknown option)."""
    if not args or args[0] not in _OPTIONS:
        return None
    command, rest, positional, options = args[0], args[1:], [], {}
    while rest:
        arg, rest = rest[0], rest[1:]
        name, given, value = arg.partition("=")
        if arg == "--json":
            options[arg] = ""
        elif name in _OPTIONS[command] and given:
            options[name] = value
        elif arg in _OPTIONS[command] and rest and not rest[0].startswith("-"):
            options[arg], rest = rest[0], rest[1:]
        elif arg.startswith("-"):
            return None
        else:
            positional.append(arg)
    return (command, positional[0], options) if len(positional) == 1 else None


def _lean_server() -> LocalServer | None:
    """The `LocalServer` of the data folder the settings would name, or None when one of the four values
    is one the settings refuse (the app says why), an `ASSISTANT_*` name is no setting's (the app's
    settings warn, naming the closest one, and it hands the command over itself), or the data folder
    has no signing key yet."""
    from assistant.cli.setting_names import NAMES

    values: dict[str, str] = {}
    if os.path.isfile(".env"):
        from dotenv import dotenv_values  # the reader of pydantic-settings' `.env` source

        values.update({k.lower(): v for k, v in dotenv_values(".env").items() if v is not None})
    values.update({k.lower(): v for k, v in os.environ.items()})  # the environment wins, as in `Settings`
    if any(name.startswith(ENV_PREFIX) and name.upper() not in NAMES for name in values):
        return None
    setting = {name: values.get(ENV_PREFIX + name) for name in ("data_dir", "host", "port", "secret_key")}
    port = setting["port"] if setting["port"] is not None else "8000"
    if not re.fullmatch(r"[0-9]{1,5}", port) or not 1 <= int(port) <= 65535:
        return None
    data_dir = Path(setting["data_dir"] if setting["data_dir"] is not None else "./var")
    key = setting["secret_key"]
    try:
        key = key if key is not None else stored_key(data_dir)
    except (ConfigError, OSError):
        return None
    if key is None or len(key) < 16:
        return None
    host = setting["host"] if setting["host"] is not None else "127.0.0.1"
    return LocalServer(server_url_at(data_dir, host, int(port)), local_token(key), str(data_dir.resolve()))
