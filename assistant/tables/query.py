"""A model-written SELECT checked (sqlglot) and run read-only, with a row and a time limit, over the tables a reader may open."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import sqlglot
from sqlglot import exp

from assistant.core.errors import AssistantError
from assistant.tables.card import table_card
from assistant.tables.loading import quote

# Nodes no query may hold. `Anonymous` is any function sqlglot does not model: duckdb's table and
# file functions (read_csv_auto, read_text, glob, query_table), getenv, pragma_* and duckdb_*
# catalog functions all parse as one, so only the scalar and aggregate functions sqlglot knows run.
_FORBIDDEN = tuple(
    getattr(exp, name) for name in (
        "Insert Update Delete Merge Create Drop Alter Command Pragma Copy Attach Detach Set Use Transaction "
        "Anonymous ReadCSV Into Describe Install Load Export Kill Summarize Show Refresh Cache Uncache"
    ).split() if hasattr(exp, name)
)

log = logging.getLogger(__name__)


class SqlRejected(AssistantError):
    """The statement is not one read-only SELECT over the reader's tables; the message says why."""

    code = "sql_rejected"
    http_status = 422


@dataclass(frozen=True)
class QueryResult:
    """What a checked SELECT returned.

    Attributes:
        sql: the statement as run (normalised by sqlglot, wrapped in the row limit).
        columns: the result's column names.
        rows: at most the row limit of tuples.
        tables: the reader's tables the statement reads, in order of appearance.
    """

    sql: str
    columns: list[str]
    rows: list[tuple]
    tables: list[str]


def check_select(sql: str, allowed: Iterable[str], *, max_rows: int) -> str:
    """The statement to run for `sql`, or the reason it may not run.

    Args:
        sql: what the model wrote (one statement, duckdb dialect; a trailing ';' is fine).
        allowed: the table names the reader may query (compared in lower case).
        max_rows: the most rows the statement may return (an outer LIMIT).

    Returns:
        `SELECT * FROM (<sql, normalised>) AS _q LIMIT <max_rows>`.

    Raises:
        SqlRejected: not parsable, not exactly one statement, not a query, a forbidden node (a write,
            ATTACH, COPY, PRAGMA, SET, a file or catalog function), a table outside `allowed`
            (qualified names and file paths included), or a result column not derived from a table
            (`invented_column`: `12 AS password_length`).
    """
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except sqlglot.errors.SqlglotError as exc:
        raise SqlRejected(f"the SQL cannot be parsed: {str(exc).splitlines()[0]}") from exc
    if len(trees) != 1:
        raise SqlRejected(f"{len(trees)} statements: exactly one SELECT is allowed")
    tree = trees[0]
    if not isinstance(tree, exp.Query):
        raise SqlRejected(f"a {type(tree).__name__} statement is not a SELECT")
    bad = next((n for n in tree.walk() if isinstance(n, _FORBIDDEN)), None)
    if bad is not None:
        raise SqlRejected(f"{type(bad).__name__} is not allowed: {bad.sql(dialect='duckdb')[:80]}")
    names = {a.lower() for a in allowed} | {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or table.args.get("db") or table.args.get("catalog"):
            raise SqlRejected(f"the table expression {table.sql(dialect='duckdb')[:80]} is not allowed")
        if table.name.lower() not in names:
            raise SqlRejected(f"the table {table.name!r} is not one the reader may query")
    invented = invented_column(tree)
    if invented is not None:
        raise SqlRejected(f"the result column {invented.sql(dialect='duckdb')[:80]} is not derived from the table")
    return f"SELECT * FROM ({tree.sql(dialect='duckdb')}) AS _q LIMIT {int(max_rows)}"


# What makes a result column data: a column of a table, '*', an aggregate (COUNT(*), COUNT(1)) or a
# window function counts rows of the table; a column with none of them is a value the model invented.
_DERIVED = (exp.Column, exp.Star, exp.AggFunc, exp.Window)
# Where a SELECT only filters (WHERE x IN (SELECT ...), EXISTS (SELECT 1 ...)), its columns are no result.
_FILTERING_ARGS = {"where", "having", "qualify", "on"}


def invented_column(tree: exp.Expression) -> exp.Expression | None:
    """The first result column of `tree` that is not derived from a table, or None.

    A column is derived when it contains a table column, '*', an aggregate or a window function
    (`CASE WHEN qty > 0 THEN 'yes' ELSE 'no' END`, `price * 1.19`, `COUNT(*)` are). A literal, literal
    arithmetic, `CAST(12 AS INT)`, a CASE of literals only, a VALUES list are not: the model made the
    value up and would present it as data (fresh-user trial: `12 AS password_length` next to a count,
    shown as a row of the asset register). Every SELECT whose rows reach the result is checked: the
    outer one, union branches, CTEs, subqueries in FROM/JOIN and scalar subqueries in the select list;
    one under WHERE, HAVING, QUALIFY or a JOIN's ON only filters and is not.

    Args:
        tree: a parsed query (sqlglot, duckdb dialect).

    Returns:
        The offending select-list expression (a VALUES list), or None.
    """
    values = next(tree.find_all(exp.Values), None)
    if values is not None:
        return values
    for select in tree.find_all(exp.Select):
        if _filters_only(select, tree):
            continue
        for column in select.expressions:
            if not any(isinstance(node, _DERIVED) for node in column.walk()):
                return column
    return None


def _filters_only(select: exp.Expression, root: exp.Expression) -> bool:
    node = select
    while node is not root and node.parent is not None:
        if node.arg_key in _FILTERING_ARGS or isinstance(node.parent, (exp.Exists, exp.In)):
            return True
        node = node.parent
    return False


@dataclass
class ReaderTables:
    """An in-memory duckdb connection that sees only a reader's tables, read-only, locked
    (`open_reader_tables`); close it when done.

    Attributes:
        con: the connection.
        names: view name -> (attached database alias, table name in the document's file).
    """

    con: duckdb.DuckDBPyConnection
    names: dict[str, tuple[str, str]]

    def card(self, view: str, *, document: str) -> str:
        """The table card of `view` (`card.table_card`), with its sheet's own headers.

        Args:
            view: a name of `names`.
            document: the document's file name, for the card's first line.
        """
        alias, table = self.names[view]
        sheet = self.con.execute(
            "SELECT comment FROM duckdb_tables() WHERE database_name = ? AND table_name = ?", [alias, table]
        ).fetchone()
        headers = dict(self.con.execute(
            "SELECT column_name, comment FROM duckdb_columns() WHERE database_name = ? AND table_name = ?", [alias, table]
        ).fetchall())
        return table_card(self.con, view, sheet=(sheet[0] or "") if sheet else "", document=document,
                          headers={c: h or "" for c, h in headers.items()})

    def close(self) -> None:
        """Close the connection."""
        self.con.close()


def open_reader_tables(tables: dict[str, tuple[Path, str]]) -> ReaderTables:
    """Attach the given tables for one reader's query, and lock the connection.

    Each document's file is attached READ_ONLY and each table gets a view under the name the reader
    uses; then external access (files, network, extensions) is switched off and the configuration
    locked, so that even a statement the checker let through cannot read a file or attach another.

    Args:
        tables: view name -> (the document's tables file, the table's name in it); only tables of
            documents the reader may open.

    Returns:
        The connection with its views.
    """
    con = duckdb.connect(":memory:")
    aliases: dict[Path, str] = {}
    names: dict[str, tuple[str, str]] = {}
    for view, (path, table) in tables.items():
        if path not in aliases:
            aliases[path] = f"doc_{len(aliases)}"
            con.execute(f"ATTACH {_string(str(path))} AS {aliases[path]} (READ_ONLY)")
        con.execute(f"CREATE TEMP VIEW {quote(view)} AS SELECT * FROM {aliases[path]}.main.{quote(table)}")
        names[view] = (aliases[path], table)
    con.execute("SET enable_external_access=false")
    con.execute("SET lock_configuration=true")
    return ReaderTables(con, names)


def run_select(con, sql: str, allowed: Iterable[str], *, max_rows: int = 50, timeout_s: float = 5.0) -> QueryResult:
    """Check `sql` and run it on `con` (`open_reader_tables`), interrupted after `timeout_s`.

    Raises:
        SqlRejected: by the checker (`check_select`), or the engine refused or interrupted it (the
            engine's error is logged, not put in the message a reader sees).
    """
    statement = check_select(sql, allowed, max_rows=max_rows)
    timer = threading.Timer(timeout_s, con.interrupt)
    timer.start()
    try:
        cursor = con.execute(statement)
        allowed_names = {a.lower(): a for a in allowed}
        read = [allowed_names[t.name.lower()] for t in sqlglot.parse_one(statement, read="duckdb").find_all(exp.Table)
                if t.name.lower() in allowed_names]
        return QueryResult(statement, [d[0] for d in cursor.description], cursor.fetchall(), list(dict.fromkeys(read)))
    except duckdb.InterruptException as exc:
        raise SqlRejected(f"the query ran past {timeout_s:g} s and was stopped") from exc
    except duckdb.Error as exc:
        # The engine's message is for the log: a reader is told that the query failed, not DuckDB's text.
        log.info("table query failed: %s: %s", statement, str(exc).splitlines()[0])
        raise SqlRejected("the query the model wrote failed in the table engine") from exc
    finally:
        timer.cancel()


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
