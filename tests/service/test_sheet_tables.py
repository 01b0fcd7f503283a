"""Large sheets ingested as tables: one card point, the document's ACL on it, the table replaced on
re-sync and removed with the file (issue 40)."""

from __future__ import annotations

import duckdb

from assistant.auth.acl_manifest import AclManifest
from assistant.composition import Assistant
from assistant.core.principals import ANONYMOUS, Principal
from assistant.tables.files import tables_file
from ingest.pipeline import Ingestor, document_id
from tests.conftest import make_settings, open_resources
from tests.workbooks import write_sheet

MANIFEST = {"default": ["everyone"], "rules": [{"path": "finance/**", "allow": ["group:finance"]}]}
FINANCE = Principal(name="fay", groups=frozenset({"finance"}))


def _prices(path, n):
    write_sheet(path, "Price list", ["Part number", "Description", "Unit price (EUR)"],
           ([f"P-{i:04d}", f"Hex bolt M{4 + i % 9}", 0.5 + i] for i in range(n)))


def _rows(settings, path) -> int:
    with duckdb.connect(str(tables_file(settings.tables_dir, document_id(path.resolve().as_uri()))), read_only=True) as con:
        return con.execute("SELECT count(*) FROM price_list").fetchone()[0]


def test_a_restricted_workbook_table_card_follows_the_acl_and_the_file(tmp_path):
    docs = tmp_path / "share"
    _prices(docs / "prices.xlsx", 250)
    budget = docs / "finance" / "budget.xlsx"
    write_sheet(budget, "Travel budget", ["Department", "Traveller", "Travel budget (EUR)"],
           ([f"Department {i % 12}", f"Employee {i}", 1000 + i] for i in range(300)))
    settings = make_settings(tmp_path / "var")
    res = open_resources(settings)
    ingestor = Ingestor(res)
    try:
        outcomes = {o.source: o for o in ingestor.sync(docs, acl=AclManifest.from_dict(MANIFEST))}
        assert {s: o.status for s, o in outcomes.items()} == {"prices.xlsx": "done", "finance/budget.xlsx": "done"}
        budget_id = document_id(budget.resolve().as_uri())
        # One card, not hundreds of row groups; the table itself in the document's file.
        assert 1 <= res.store.count(doc_id=budget_id) <= 3
        assert tables_file(settings.tables_dir, budget_id).exists() and _rows(settings, docs / "prices.xlsx") == 250

        retriever = Assistant.build(res).retriever
        question = "travel budget per department"
        assert all(h.source != "finance/budget.xlsx" for h in retriever.retrieve(question, principal=ANONYMOUS, top_k=10))
        hits = [h for h in retriever.retrieve(question, principal=FINANCE, top_k=10) if h.source == "finance/budget.xlsx"]
        assert hits and hits[0].heading == "Travel budget — table travel_budget" and "300 rows" in hits[0].text

        _prices(docs / "prices.xlsx", 260)  # re-sync replaces the table
        budget.unlink()  # deletion removes it
        outcomes = {o.source: o for o in ingestor.sync(docs, acl=AclManifest.from_dict(MANIFEST))}
        assert outcomes["prices.xlsx"].status == "done" and outcomes["finance/budget.xlsx"].status == "deleted"
        assert _rows(settings, docs / "prices.xlsx") == 260
        assert not tables_file(settings.tables_dir, budget_id).exists()
        assert not list((settings.tables_dir / ".staging").glob("*.duckdb*"))
    finally:
        ingestor.close()
        res.close()
