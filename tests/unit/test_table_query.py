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
