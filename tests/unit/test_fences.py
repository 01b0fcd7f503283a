"""No unbalanced code fence reaches the reader (`assistant.answering.markdown.tidy`), and a table answer's SQL is read
out of a model reply whatever its fences (`extract_sql`)."""

import pytest

from assistant.answering.markdown import tidy
from assistant.answering.table_answers import extract_sql


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Use 15 characters [1].", "Use 15 characters [1]."),
        ("Run:\n```sh\nmake test\n```\nDone [1].", "Run:\n```sh\nmake test\n```\nDone [1]."),
        # a reply cut inside its block: closed
        ("Run:\n```sh\nmake test", "Run:\n```sh\nmake test\n```"),
        # a lone fence after the last line (fresh-user trial): dropped
        ("**50** (count) [1]\n\n```", "**50** (count) [1]"),
        ("**50** (count) [1] ```", "**50** (count) [1]"),
        ("Use `x` and ```y``` here.", "Use `x` and ```y``` here."),
        # a longer fence is closed only by one as long; a tilde fence by tildes
        ("````md\n```\ninner\n```\n````", "````md\n```\ninner\n```\n````"),
        ("~~~\ncode\n```", "~~~\ncode\n```\n~~~"),
    ],
    ids=["plain", "balanced", "open-block", "stray-line", "stray-inline", "inline-span", "nested", "tilde"],
)
def test_fences_are_balanced_in_the_text_shown(text, expected):
    assert tidy(text) == expected
    assert tidy(expected) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "SELECT count(*) FROM parts WHERE supplier ILIKE 'cobalt supply'",
        "```sql\nSELECT count(*) FROM parts WHERE supplier ILIKE 'cobalt supply';\n```",
        "```sql\nSELECT count(*) FROM parts WHERE supplier ILIKE 'cobalt supply';",  # cut before its fence closed
        "SELECT count(*) FROM parts WHERE supplier ILIKE 'cobalt supply';\n```",  # a lone closing fence
        "Here is the query:\n```\nSELECT count(*) FROM parts WHERE supplier ILIKE 'cobalt supply'\n```\nIt counts parts.",
    ],
    ids=["bare", "fenced", "unclosed", "stray-close", "prose"],
)
def test_the_sql_is_read_without_fences(reply):
    assert extract_sql(reply) == "SELECT count(*) FROM parts WHERE supplier ILIKE 'cobalt supply'"
