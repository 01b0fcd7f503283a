"""Where the command line finds the running `assistant serve` on this machine, and what it says when
nothing answers there."""

from __future__ import annotations

from assistant.core.errors import UpstreamUnavailableError
from assistant.core.settings import Settings


def server_url(settings: Settings) -> str:
    """The running server's base URL on this machine (a wildcard bind address is reached on loopback)."""
    host = settings.server.host if settings.server.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"http://{'[' + host + ']' if ':' in host else host}:{settings.server.port}"


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
