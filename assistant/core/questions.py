"""The one check every question or search query passes, wherever it comes from (API routes, the
OpenAI-compatible route, the CLI, evaluation sets, `Answerer`), and its length bound."""

from __future__ import annotations

from assistant.core.errors import InvalidRequestError

# Characters a question or query may have; the API's request models declare the same bound.
MAX_QUERY_CHARS = 4_000


def check_query(query: str) -> None:
    """Refuse a question or query that is blank, longer than `MAX_QUERY_CHARS` characters, or not
    Unicode text (lone surrogates: bytes of another encoding passed on a UTF-8 command line).

    Raises:
        InvalidRequestError: naming the problem, the same for the CLI and every API route.
    """
    if not query or not query.strip():
        raise InvalidRequestError("the question is empty")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRequestError(
            f"the question is not UTF-8 text: character {exc.start} is a lone surrogate, as left by bytes of "
            "another encoding (on a command line, check the terminal's LANG or LC_ALL)"
        ) from exc
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidRequestError(f"the question has {len(query)} characters; at most {MAX_QUERY_CHARS} are accepted")
