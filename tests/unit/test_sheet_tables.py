"""Large sheets become one typed duckdb table and one table card (XLSX, ODS, CSV), a sheet's tables separated
by blank rows one table each; small sheets stay row groups (issue 40)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import duckdb
import pytest
from openpyxl import Workbook

from ingest.formats.limits import Limits
from ingest.readers import parse_file
from tests.workbooks import write_ods


def _workbook(path, rows: int) -> None:
    if path.suffix == ".ods":
        return _ods_workbook(path, rows)
    book = Workbook()
    big = book.active
    big.title = "Asset Inventory"
    big.append(["Location", None, "Value (EUR)", "Room", "Purchased", "Code"])  # merged over two columns
    big.merge_cells("A1:B1")
    big.append(["Building", "Floor", None, None, None, None])
    for i in range(rows):
        big.append(_asset(i))
    small = book.create_sheet("Contacts")
    small.append(["Name", "Phone"])
    small.append(["Ada Ops", "555-0101"])
    book.save(path)


def _asset(i: int) -> list:
    # Room is text that looks like a number ('1.10' and '1.1' are two rooms); Code has leading zeros.
    return [
        f"B-{i % 7}",
        i % 4,
        100 + i * 2.5,
        "1.10" if i % 2 else "1.1",
        dt.datetime(2024, 1 + i % 12, 1),
        f"{i:05d}",
    ]


def _ods_workbook(path, rows: int) -> None:
    """`_workbook` as an ODS file: the same sheets, cells and merged header."""
    inventory = [["Location", None, "Value (EUR)", "Room", "Purchased", "Code"], ["Building", "Floor"]]
    inventory += [_asset(i) for i in range(rows)]
    write_ods(
        path,
        {"Asset Inventory": inventory, "Contacts": [["Name", "Phone"], ["Ada Ops", "555-0101"]]},
        spans={"Asset Inventory": {(0, 0): (1, 2)}},
    )


def _parse(path, tables):
    doc = parse_file(path, limits=replace(Limits(), table_min_rows=200, tables_path=tables), streamed=True)
    return list(doc.all_sections())


@pytest.mark.parametrize("suffix", [".xlsx", ".ods"])
def test_a_large_sheet_is_one_typed_table_and_one_card(tmp_path, suffix):
    _workbook(tmp_path / f"assets{suffix}", rows=300)
    tables = tmp_path / "t.duckdb"
    sections = _parse(tmp_path / f"assets{suffix}", tables)
    cards = [s for s in sections if " — table " in s.heading]
    assert [s.heading for s in cards] == ["Asset Inventory — table asset_inventory"]
    assert "300 rows" in cards[0].text and "value_eur (header 'Value (EUR)'; DOUBLE" in cards[0].text
    assert any(s.heading.startswith("Contacts") and "Ada Ops" in s.text for s in sections)  # small sheet: as before
    con = duckdb.connect(str(tables), read_only=True)
    types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns").fetchall())
    assert types == {"location_building": "VARCHAR", "location_floor": "BIGINT", "value_eur": "DOUBLE",
                     "room": "VARCHAR", "purchased": "DATE", "code": "VARCHAR"}
    assert con.execute("SELECT count(*), count(DISTINCT room), sum(value_eur), min(code) FROM asset_inventory").fetchone() == (
        300, 2, sum(100 + i * 2.5 for i in range(300)), "00000")


def test_a_csv_file_gets_types_from_its_text_but_codes_stay_text(tmp_path):
    lines = ["id,zip,amount,room,day"] + [f"{i},{i:05d},{i}.25,1.{i % 3}0,2024-02-{1 + i % 28:02d}" for i in range(250)]
    (tmp_path / "orders.csv").write_text("\n".join(lines) + "\n")
    tables = tmp_path / "t.duckdb"
    [card] = _parse(tmp_path / "orders.csv", tables)
    assert card.heading == "table orders" and "250 rows" in card.text
    con = duckdb.connect(str(tables), read_only=True)
    types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns").fetchall())
    assert types == {"id": "BIGINT", "zip": "VARCHAR", "amount": "DOUBLE", "room": "VARCHAR", "day": "DATE"}
    assert con.execute("SELECT count(DISTINCT room) FROM orders").fetchone() == (3,)


@pytest.mark.parametrize(("rows", "suffix"), [(150, ".xlsx"), (300, ".xlsx"), (150, ".ods")])
def test_without_a_tables_file_or_below_the_setting_sheets_stay_row_groups(tmp_path, rows, suffix):
    _workbook(tmp_path / f"assets{suffix}", rows=rows)
    sections = _parse(tmp_path / f"assets{suffix}", None if rows == 300 else tmp_path / "t.duckdb")
    assert not any(" — table " in s.heading for s in sections)
    assert sum(s.heading.startswith("Asset Inventory") for s in sections) > 10
    assert not (tmp_path / "t.duckdb").exists()


def test_tables_separated_by_blank_rows_in_a_large_sheet_are_one_table_each(tmp_path):
    orders = [["Orders 2024"], ["Order", "Customer", "Amount", "Date"]]
    orders += [[f"O-{i}", f"C{i % 5}", 10 + i, dt.date(2024, 1, 1) + dt.timedelta(days=i)] for i in range(250)]
    orders += [[], *([f"O-{i}", "C9", 1, dt.date(2025, 1, 1)] for i in range(250, 252))]  # more rows after a blank row
    orders += [[], ["Order", "Customer", "Amount", "Date"], ["O-300", "C1", 5, dt.date(2025, 2, 1)]]  # header again
    refunds = [[], [], ["Refunds"], ["Refund", "Order", "Refunded (EUR)"]] + [
        [f"R-{i}", f"O-{i}", i * 1.5] for i in range(30)
    ]
    totals = [[], ["Region", "Total"]] + [[f"Region {i}", i * 100] for i in range(4)]
    write_ods(tmp_path / "sales.ods", {"Sales": orders + refunds + totals})
    tables = tmp_path / "t.duckdb"
    sections = _parse(tmp_path / "sales.ods", tables)
    assert [s.heading for s in sections] == [
        "Sales — table sales",
        "Sales — table sales_refunds",
        "Sales — table sales_2",
    ]
    assert "30 rows" in sections[1].text and "refunded_eur (header 'Refunded (EUR)'; DOUBLE" in sections[1].text
    con = duckdb.connect(str(tables), read_only=True)
    assert con.execute("SELECT count(*), sum(amount) FROM sales").fetchone() == (
        253,
        sum(10 + i for i in range(250)) + 7,
    )
    assert con.execute("SELECT count(*), sum(refunded_eur) FROM sales_refunds").fetchone() == (
        30,
        sum(i * 1.5 for i in range(30)),
    )
    assert con.execute("SELECT total FROM sales_2 WHERE region = 'Region 3'").fetchone() == (300,)
