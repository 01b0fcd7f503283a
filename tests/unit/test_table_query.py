"""The SQL checker runs one read-only SELECT over the reader's tables and refuses everything else (issue 40)."""

from __future__ import annotations

import pytest

from assistant.tables.cells import typed_text
from assistant.tables.loading import TableWriter
from assistant.tables.query import SqlRejected, open_reader_tables, run_select

HOSTILE = {
    "drop": "DROP TABLE inventory",
    "attach": "ATTACH '/tmp/x.db' AS x",
    "copy out": "COPY inventory TO '/tmp/leak.csv'",
    "read_csv": "SELECT * FROM read_csv('/etc/passwd')",
    "read_csv_auto in a subquery": "SELECT (SELECT count(*) FROM read_csv_auto('/etc/passwd')) AS n",
    "read_text": "SELECT content FROM read_text('/etc/passwd')",
    "file path as a table": "SELECT * FROM '/etc/passwd'",
    "pragma": "PRAGMA database_list",
    "pragma function": "SELECT * FROM pragma_database_list()",
    "a write hidden in a CTE": "WITH x AS (DELETE FROM inventory RETURNING *) SELECT * FROM x",
    "insert select": "INSERT INTO inventory SELECT * FROM inventory",
    "two statements": "SELECT 1 FROM inventory; DROP TABLE inventory",
    "a table not allowed": "SELECT * FROM payroll",
    "catalog-qualified": "SELECT * FROM doc_0.main.inventory",
    "duckdb_settings": "SELECT * FROM duckdb_settings()",
    "getenv": "SELECT getenv('HOME')",
    "set": "SET threads=64",
    "create as": "CREATE TABLE t AS SELECT * FROM inventory",
    "load an extension": "LOAD httpfs",
    "not SQL": "Sorry, I cannot answer that.",
}


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tables")
    writer = TableWriter(folder / "doc.duckdb", document="inventory.xlsx")
    rows = ([f"B-{i % 5}", typed_text(i, str(i))] for i in range(2000))
    writer.add("Inventory", ["Building", "Value"], rows)
    writer.add("Payroll", ["Name", "Salary"], iter([["Ada", typed_text(9, "9")], ["Bob", typed_text(8, "8")]]))
    writer.close()
    # Only inventory gets a view and is allowed; the checker refuses payroll and any qualified name.
    reader = open_reader_tables({"inventory": (folder / "doc.duckdb", "inventory")})
    yield reader.con
    reader.close()


@pytest.mark.parametrize("sql", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_sql_is_rejected(tables, sql):
    with pytest.raises(SqlRejected):
        run_select(tables, sql, {"inventory"})


def test_a_select_runs_with_its_row_limit_and_a_comment_is_inert(tables):
    result = run_select(tables, "SELECT building, count(*) AS n, sum(value) AS total FROM inventory GROUP BY 1 ORDER BY 1 -- ; DROP TABLE inventory", {"inventory"}, max_rows=3)
    assert result.columns == ["building", "n", "total"]
    assert result.rows == [("B-0", 400, sum(range(0, 2000, 5))), ("B-1", 400, sum(range(1, 2000, 5))), ("B-2", 400, sum(range(2, 2000, 5)))]
    assert result.sql.endswith("LIMIT 3")


def test_the_locked_connection_refuses_what_the_checker_would(tables):
    import duckdb

    for sql in ("SELECT * FROM read_csv('/etc/passwd')", "SET enable_external_access=true",
                "ATTACH '/tmp/other.duckdb' AS other", "DROP TABLE doc_0.main.inventory", "DELETE FROM doc_0.main.inventory"):
        with pytest.raises(duckdb.Error):
            tables.execute(sql).fetchall()


def test_a_slow_query_is_interrupted(tables):
    slow = "SELECT count(*) FROM inventory a, inventory b, inventory c WHERE a.value + b.value + c.value = 7"
    with pytest.raises(SqlRejected, match="stopped"):
        run_select(tables, slow, {"inventory"}, timeout_s=0.5)


def test_the_card_is_built_again_with_the_sheets_own_headers(tmp_path):
    writer = TableWriter(tmp_path / "doc.duckdb", document="rooms.xlsx")
    writer.add("Rooms 2024", ["Room no.", "Seats"], ([f"R{i}", typed_text(i, str(i))] for i in range(5)))
    writer.close()
    reader = open_reader_tables({"rooms": (tmp_path / "doc.duckdb", "rooms_2024")})
    card = reader.card("rooms", document="rooms.xlsx")
    reader.close()
    assert card.startswith("Table rooms: sheet 'Rooms 2024' of rooms.xlsx, 5 rows.")
    assert "- room_no (header 'Room no.'; VARCHAR" in card and "- seats (header 'Seats'; BIGINT; 0 to 4)" in card


INVENTED = {
    "a literal next to a count": "SELECT count(*) AS total, 12 AS password_length FROM inventory",
    "literal arithmetic": "SELECT 6 * 2 AS n FROM inventory",
    "a cast literal": "SELECT CAST('12' AS INTEGER) AS n FROM inventory",
    "a case of literals": "SELECT CASE WHEN 1 = 1 THEN 12 ELSE 0 END AS n FROM inventory",
    "a literal in a CTE": "WITH x AS (SELECT building, 12 AS n FROM inventory) SELECT building, n FROM x",
    "a literal in a derived table": "SELECT n FROM (SELECT 12 AS n FROM inventory) AS s",
    "a union branch without a table": "SELECT value FROM inventory UNION ALL SELECT 12",
    "a VALUES list": "SELECT * FROM (VALUES (12)) AS t(n)",
    "a constant scalar subquery": "SELECT (SELECT 12) AS n, count(*) FROM inventory",
}


@pytest.mark.parametrize("sql", INVENTED.values(), ids=INVENTED.keys())
def test_a_result_column_not_derived_from_the_table_is_refused(tables, sql):
    with pytest.raises(SqlRejected, match="not derived from the table"):
        run_select(tables, sql, {"inventory"})


DERIVED = {
    "count(*)": ("SELECT count(*) AS n FROM inventory", [(2000,)]),
    "sum of a column": ("SELECT sum(value) AS total FROM inventory WHERE building = 'B-1'", [(sum(range(1, 2000, 5)),)]),
    "a column times a literal": ("SELECT value * 1.19 AS gross FROM inventory WHERE value = 100", [(119.0,)]),
    "a case on a column": ("SELECT CASE WHEN value > 0 THEN 'yes' ELSE 'no' END AS positive FROM inventory WHERE value = 0",
                           [("no",)]),
    "EXISTS (SELECT 1 ...)": ("SELECT count(*) FROM inventory a WHERE EXISTS (SELECT 1 FROM inventory b WHERE b.value = a.value + 1999)",
                              [(1,)]),
}


@pytest.mark.parametrize(("sql", "rows"), DERIVED.values(), ids=DERIVED.keys())
def test_result_columns_derived_from_the_table_run(tables, sql, rows):
    result = run_select(tables, sql, {"inventory"})
    assert result.rows == rows  # a DECIMAL 119.00 equals 119.0


def test_an_engine_error_is_not_shown_to_the_reader(tables, caplog):
    # Fresh-user trial: a date compared with LIKE put DuckDB's "Binder Error ..." text in the answer.
    with caplog.at_level("INFO", logger="assistant.tables.query"), pytest.raises(SqlRejected) as refused:
        run_select(tables, "SELECT count(*) FROM inventory WHERE value LIKE '2026%'", {"inventory"})
    assert "Error" not in refused.value.message and "failed in the table engine" in refused.value.message
    assert "Binder Error" in caplog.text or "Error" in caplog.text  # kept for the operator's log
