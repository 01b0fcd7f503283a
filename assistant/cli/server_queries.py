"""`assistant search` and `assistant ask` handed to the running `assistant serve` of the same data folder.

The server has the embedding model, the reranker and the chat model loaded and holds the embedded
vector store, so the command returns in about a second instead of loading them (10-20 s of CPU, and
`store_locked` with the embedded store). It is found and admitted as `assistant ingest`'s hand-over
is: at `server_url` on loopback, with the local token derived from the data folder's signing key
(`signing.local_ingest_token`), and it checks that the command's data folder is its own; a server
of another data folder refuses (401), and the command then runs in process as when none answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from assistant.auth.signing import local_ingest_token
from assistant.cli.local_server import server_url
from assistant.core.errors import AssistantError
from assistant.core.settings import Settings

CONNECT_TIMEOUT_S = 0.5  # loopback: a server that runs accepts at once; none costs this at most
ANSWER_TIMEOUT_S = 600.0


class NoServer(Exception):
    """No server of this data folder answers: the command runs in process."""


def _client(settings: Settings) -> httpx.Client:
    return httpx.Client(
        base_url=server_url(settings), headers={"X-Assistant-Local-Token": local_ingest_token(settings)},
        timeout=httpx.Timeout(ANSWER_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
    )


def _data_dir(settings: Settings) -> str:
    return str(settings.storage.data_dir.resolve())


def _refusal(answer: httpx.Response) -> AssistantError | NoServer:
    """What a non-2xx answer means: 401, a server of another data folder (it refuses this folder's
    token or path), else the server's error as the command reports it (`{"error": {"code", "message"}}`)."""
    if answer.status_code == 401:
        return NoServer(f"the server at {answer.request.url.host}:{answer.request.url.port} serves another data folder")
    try:
        error = answer.json()["error"]
        return AssistantError(str(error["message"]), code=str(error["code"]))
    except (ValueError, KeyError, TypeError):
        return AssistantError(f"the server answered {answer.status_code}: {answer.text[:300]}", code="upstream_unavailable")


def search_through_server(settings: Settings, query: str, *, top_k: int, as_user: str | None) -> list[dict[str, Any]]:
    """The server's search rows (`answering.hits.hit_rows`) for `query`.

    Raises:
        NoServer: no server of this data folder answers.
        AssistantError: the server refused the search (its code and message: an unknown `--as` user,
            a blank query).
    """
    try:
        with _client(settings) as client:
            answer = client.post("/api/local/search", json={"query": query, "top_k": top_k, "as_user": as_user, "data_dir": _data_dir(settings)})
    except httpx.TransportError as exc:
        raise NoServer(str(exc)) from exc
    if answer.status_code != 200:
        raise _refusal(answer)
    return answer.json()


def ask_through_server(
    settings: Settings, question: str, *, as_user: str | None, on_event: Callable[[dict[str, Any]], None] | None
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
    body = {"question": question, "as_user": as_user, "stream": on_event is not None, "data_dir": _data_dir(settings)}
    try:
        with _client(settings) as client, client.stream("POST", "/api/local/ask", json=body) as answer:
            if answer.status_code != 200:
                answer.read()
                raise _refusal(answer)
            if on_event is None:
                answer.read()
                return answer.json()
            for event in _json_lines(answer.iter_lines()):
                if event["event"] == "error":
                    raise AssistantError(event["message"], code=event["code"])
                on_event(event)
    except httpx.ConnectError as exc:
        raise NoServer(str(exc)) from exc
    except httpx.TransportError as exc:  # it had the question: asking again in process would answer twice
        raise AssistantError(f"the server at {server_url(settings)} stopped answering: {exc}", code="upstream_unavailable") from exc
    return None


def _json_lines(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.strip():
            yield json.loads(line)
