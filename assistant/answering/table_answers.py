"""Questions whose best evidence is a table card, answered by one checked SELECT over the reader's tables (issue 40).

The chat model (a coder model) gets the cards of the tables among the sources and writes one SELECT;
`assistant.tables.query` checks and runs it on a locked, read-only connection that sees only those
tables (retrieval returned their cards, so the reader may open their documents). The answer is the
result rows themselves, not the model's restatement of them, so that no number is stated that the
query did not return; it cites the card's sheet, whose source preview shows the query and the rows. A
query that is refused, fails or returns nothing gives "not found" naming the table, never a guess, unless
(refused or failed) documents were found for the question too: they answer it (`answerer.py`).
A table is queried only when its card is the best source for the question itself, not only for a
query condensed from earlier turns (`cards_for_question`), or when the question follows up an answer
from that table and finds nothing of its own (`table_follow_up`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from assistant.answering.citations import Citation, document_route
from assistant.answering.markdown import tidy
from assistant.core.language import question_language
from assistant.core.llm import LLM, ChatMessage, StreamResult, Usage
from assistant.retrieval import RetrievedChunk
from assistant.tables.files import tables_file
from assistant.tables.query import QueryResult, SqlRejected, open_reader_tables, run_select

# The heading ingestion gives a table card: '<sheet> — table <name>' ('table <name>' for CSV).
_CARD_HEADING = re.compile(r"(?:^| — )table (\w+)$")
_SQL_START = re.compile(r"\b(WITH|SELECT)\b", re.I)
SQL_MAX_TOKENS = 256
SHOWN_ROWS = 20  # rows of a result shown in the answer (the query's own limit is `max_rows`)
SQL_PROMPT = (
    "You write one DuckDB SQL SELECT statement that answers the user's question from the tables below. "
    "Use only these tables and columns, exactly as named (snake_case). Compare text case-insensitively "
    "(ILIKE) unless an exact code is given. Reply with the SQL only, no explanation.\n\n{cards}"
)
# A follow-up ("那Borg Metals呢？", "and for Delta Tools?") after a table answer, with the question it follows.
# Of three wordings tried with Qwen2.5-Coder-1.5B on "And for Delta Tools?", "那Borg Metals呢？" and "How
# many of them have a stock of 0?" after a sum, this one wrote the right SELECT for all three.
FOLLOW_UP = "Earlier question: {earlier}\nNow answer this follow-up, which replaces what it names in the earlier question: {question}"
NOT_FOUND_EMPTY = {
    "en": "Not found: the query on table {table} ({place}) returned no rows.",
    "zh": "未找到：在表 {table}（{place}）中的查询没有返回任何行。",
}
NOT_FOUND_FAILED = {
    "en": "Not found: no query on table {table} ({place}) could answer this ({reason}).",
    "zh": "未找到：无法通过查询表 {table}（{place}）回答这个问题（{reason}）。",
}
ANSWER_HEAD = {"en": "From table {table} ({place}) [1]:", "zh": "来自表 {table}（{place}）[1]："}
_ANSWERED_FROM = re.compile(r"From table (\w+) \(|来自表 (\w+)（")


@dataclass(frozen=True)
class TableAnswer:
    """What the table path made of a question.

    Attributes:
        text: the answer (the result rows under the table it came from, cited [1]; the query is in
            the citation's snippet) or the "not found" naming the table.
        abstained: True for "not found".
        citations: the card of the table the query read, its snippet the query and the rows.
        usage: the tokens the SQL generation used.
        result: the query's result (None when it was refused or failed).
    """

    text: str
    abstained: bool
    citations: list[Citation]
    usage: Usage
    result: QueryResult | None


def table_cards(sources: Sequence[RetrievedChunk]) -> dict[str, RetrievedChunk]:
    """The table cards among `sources` by table name (the first card of each table; a name taken by
    another document's table gets '_2', '_3'...), or {} when the best source is not a card."""
    if not sources or not _CARD_HEADING.search(sources[0].heading):
        return {}
    cards: dict[str, RetrievedChunk] = {}
    seen: set[tuple[str, str]] = set()
    for chunk in sources:
        match = _CARD_HEADING.search(chunk.heading)
        if match is None or (chunk.doc_id, match.group(1)) in seen:
            continue
        seen.add((chunk.doc_id, match.group(1)))
        name, n = match.group(1), 2
        while name in cards:
            name, n = f"{match.group(1)}_{n}", n + 1
        cards[name] = chunk
    return cards


def cards_for_question(cards: dict[str, RetrievedChunk], own: Sequence[RetrievedChunk]) -> dict[str, RetrievedChunk]:
    """The entries of `cards` (`table_cards` of the sources found with a query condensed from the
    conversation) that are also cards of `own`, the chunks found for the question alone; {} when
    the best of `own` is not a card: the table is then evidence only through earlier turns."""
    mine = {(c.doc_id, c.chunk_id) for c in table_cards(own).values()}
    return {name: chunk for name, chunk in cards.items() if (chunk.doc_id, chunk.chunk_id) in mine}


def table_follow_up(history: Sequence[ChatMessage]) -> tuple[str, str] | None:
    """`(table, earlier question)` when the last answer of `history` came from a table (its first line
    names the table, `ANSWER_HEAD`) and a question of the reader's came before it, else None.

    Args:
        history: the earlier turns, oldest first.
    """
    last = next((i for i in range(len(history) - 1, -1, -1) if history[i]["role"] == "assistant"), None)
    if last is None:
        return None
    match = _ANSWERED_FROM.match(history[last]["content"].strip())
    earlier = next((m["content"] for m in reversed(history[:last]) if m["role"] == "user"), None)
    if match is None or earlier is None:
        return None
    return match.group(1) or match.group(2), earlier


def document_evidence(
    sources: Sequence[RetrievedChunk], *, supports: Callable[..., bool] | None = None
) -> list[RetrievedChunk]:
    """The sources that are not table cards; with `supports` (`AbstentionRule.supports`), only those
    that are evidence for the question by themselves."""
    return [c for c in sources if not _CARD_HEADING.search(c.heading)
            and (supports is None or supports(c, semantic=c.semantic))]


async def answer_from_tables(
    question: str,
    cards: dict[str, RetrievedChunk],
    *,
    tables_dir: Path,
    llm: LLM,
    earlier: str | None = None,
    lang: str | None = None,
    max_rows: int = 50,
    timeout_s: float = 5.0,
) -> TableAnswer:
    """Answer `question` with one SELECT over the tables of `cards` (`table_cards`).

    Args:
        question: the reader's question (or the retrieval query made from it).
        cards: table name -> its card chunk, all from documents the reader may open.
        earlier: the reader's earlier question when `question` follows up a table answer
            (`table_follow_up`): the model is given both, to answer the follow-up.
        lang: the language of the answer ('en', 'zh'); default: `question`'s.
        tables_dir: the tables folder (`Settings.tables_dir`).
        llm: the chat model that writes the SQL (temperature 0).
        max_rows: the most rows the query returns.
        timeout_s: seconds the query may run before it is interrupted.

    Returns:
        The answer; "not found" naming the table when the SQL is refused, fails or returns no rows.
    """
    lang = lang or question_language(question)
    refs = {name: (tables_file(tables_dir, chunk.doc_id), _CARD_HEADING.search(chunk.heading).group(1))
            for name, chunk in cards.items()}
    refs = {name: ref for name, ref in refs.items() if ref[0].exists()}
    first = next(iter(cards))
    if not refs:
        return _not_found(NOT_FOUND_FAILED, lang, first, cards[first], "its table file is missing", Usage(), None)
    reader = await asyncio.to_thread(open_reader_tables, refs)
    try:
        prompt_cards = await asyncio.to_thread(
            lambda: "\n\n".join(reader.card(name, document=_file_name(cards[name])) for name in refs)
        )
        messages: list[ChatMessage] = [
            {"role": "system", "content": SQL_PROMPT.format(cards=prompt_cards)},
            {"role": "user", "content": FOLLOW_UP.format(earlier=earlier, question=question) if earlier else question},
        ]
        generated = StreamResult()
        reply = await llm.complete(messages, max_tokens=SQL_MAX_TOKENS, temperature=0.0, result=generated)
        usage = generated.usage
        sql = extract_sql(reply)
        try:
            result = await asyncio.to_thread(run_select, reader.con, sql, list(refs), max_rows=max_rows, timeout_s=timeout_s)
        except SqlRejected as exc:
            return _not_found(NOT_FOUND_FAILED, lang, first, cards[first], exc.message, usage, None)
    finally:
        reader.close()
    used = result.tables[0] if result.tables else first
    chunk = cards[used]
    if not result.rows:
        return _not_found(NOT_FOUND_EMPTY, lang, used, chunk, "", usage, result)
    # The result with its citation; the query is shown in the source preview (the citation's snippet),
    # not repeated in the answer (fresh-user trial: the SQL block read as part of the answer).
    text = tidy("\n\n".join([ANSWER_HEAD[lang].format(table=used, place=_place(chunk)), render_rows(result)]))
    citation = Citation(
        n=1, source=chunk.source, route=document_route(chunk.doc_id), doc_id=chunk.doc_id, chunk_id=chunk.chunk_id,
        title=chunk.title, heading=chunk.heading, page=None, score=chunk.score, snippet=_preview(sql, result),
    )
    return TableAnswer(text, False, [citation], usage, result)


def extract_sql(reply: str) -> str:
    """The SQL in a model's reply: from its first SELECT or WITH to the end of the statement.

    The statement ends at the first fence after it, closing or not (a reply cut inside its fenced
    block, or one that ends with a lone fence).

    Args:
        reply: the chat model's reply to `SQL_PROMPT`.

    Returns:
        The statement without fences or a trailing ';' (the reply, stripped, when it holds no SELECT
        or WITH: the checker then refuses it).
    """
    start = _SQL_START.search(reply)
    if start is None:
        return reply.replace("```", " ").strip()
    text = reply[start.start() :].split("```", 1)[0]
    return text.strip().rstrip(";").strip()


def render_rows(result: QueryResult) -> str:
    """The result as the answer shows it: one value alone, else a Markdown table of at most `SHOWN_ROWS` rows."""
    if len(result.rows) == 1 and len(result.columns) == 1:
        return f"**{_value(result.rows[0][0])}** ({result.columns[0]})"
    lines = ["| " + " | ".join(result.columns) + " |", "|" + "---|" * len(result.columns)]
    lines += ["| " + " | ".join(_value(v) for v in row) + " |" for row in result.rows[:SHOWN_ROWS]]
    if len(result.rows) > SHOWN_ROWS:
        lines.append(f"({len(result.rows) - SHOWN_ROWS} more rows)")
    return "\n".join(lines)


def _value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.10g}"
    return str(value)


def _preview(sql: str, result: QueryResult) -> str:
    rows = "; ".join(", ".join(_value(v) for v in row) for row in result.rows[:5])
    return f"{' '.join(sql.split())} → {len(result.rows)} row(s): {rows}"


def _file_name(chunk: RetrievedChunk) -> str:
    return PurePosixPath(chunk.source).name


def _place(chunk: RetrievedChunk) -> str:
    sheet = chunk.heading.rsplit(" — table ", 1)[0] if " — table " in chunk.heading else ""
    return f"sheet '{sheet}' of {_file_name(chunk)}" if sheet else _file_name(chunk)


def _not_found(template: dict, lang: str, table: str, chunk: RetrievedChunk, reason: str, usage: Usage,
               result: QueryResult | None) -> TableAnswer:
    text = template[lang].format(table=table, place=_place(chunk), reason=reason)
    return TableAnswer(text, True, [], usage, result)
