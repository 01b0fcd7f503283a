"""Where the command line finds the running `assistant serve` on this machine, and what it says when
nothing answers there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.core.errors import UpstreamUnavailableError

if TYPE_CHECKING:  # a search handed to the server finds it without importing the settings (`server_queries`)
    from assistant.core.settings import Settings

ADDRESS_FILE = "server-address.json"


def _address_file(settings: Settings) -> Path:
    return settings.storage.data_dir / ADDRESS_FILE


@contextmanager
def announced_address(settings: Settings, host: str, port: int) -> Iterator[None]:
    """While `assistant serve` runs, its address is written in the data folder (`server-address.json`),
    so that a command run for the same data folder finds it whatever ASSISTANT_PORT says there; the
    file is removed when the server stops (a stale one after a crash only costs a refused connection).
    """
    path = _address_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": host, "port": port}))
    try:
        yield
    finally:
        with suppress(OSError):
            path.unlink()


def server_url(settings: Settings) -> str:
    """The running server's base URL on this machine: the address the server of this data folder
    announced (`announced_address`), else ASSISTANT_HOST:ASSISTANT_PORT; a wildcard bind address is
    reached on loopback."""
    return server_url_at(settings.storage.data_dir, settings.server.host, settings.server.port)


def server_url_at(data_dir: Path, host: str, port: int) -> str:
    """`server_url` of the data folder `data_dir`, with `host` and `port` the configured address."""
    with suppress(OSError, ValueError, KeyError, TypeError):
        announced = json.loads((data_dir / ADDRESS_FILE).read_text())
        host, port = str(announced["host"]), int(announced["port"])
    host = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def unreachable_server(base: str, exc: BaseException, *, context: str, otherwise: str = "") -> UpstreamUnavailableError:
    """The error of a command that needed the server at `base` and could not connect.

    Args:
        base: the URL tried (`server_url`, or the one the user gave).
        exc: the connection error (its text says why: refused, timed out, unknown host).
        context: why the server was needed, as the message's opening clause.
        otherwise: what to do when no server runs at all (appended), or ''.

    Returns:
        An `UpstreamUnavailableError` naming the address tried, the reason, and the settings that
        choose the address (ASSISTANT_HOST, ASSISTANT_PORT), so that the user can point the command
        at the server that really runs.
    """
    return UpstreamUnavailableError(
        f"{context}, but no `assistant serve` answers at {base} ({type(exc).__name__}: {exc}). The command looks "
        "for the server at ASSISTANT_HOST:ASSISTANT_PORT (default 127.0.0.1:8000): run it with the same "
        "ASSISTANT_HOST and ASSISTANT_PORT as the server (in the environment or .env)"
        + (f"; {otherwise}" if otherwise else "")
    )
