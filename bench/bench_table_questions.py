"""Issue 40 figures: 20 questions of our own over 3 generated workbooks (English and Chinese), answered
through the product's answering path with the shipped chat model: right, wrong, declined, SQL refused.

Workbooks (each above ASSISTANT_TABLE_MIN_ROWS, so each is a table with one card): a parts price list
(300 rows, English), a travel budget (240 rows, Chinese headers and values), an on-call rota (CSV, 400
rows). Each question has its exact answer computed here from the generated rows; an answer is right when
every expected value appears in its result (the rows it shows; the query is only in its citation), declined when
it is "not found", wrong otherwise. "SQL refused or failed" counts the declines whose query the checker
refused or the engine could not run.

Usage: .venv/bin/python bench/bench_table_questions.py [--only N]   (N: the first N questions)
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime as dt
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SUPPLIERS = ["Acme Fasteners", "Borg Metals", "Cobalt Supply", "Delta Tools", "Ember Parts", "Fjord Industrial"]
DEPARTMENTS = ["财务部", "人事部", "市场部", "研发部", "销售部", "法务部", "采购部", "行政部", "客服部", "质量部", "物流部", "信息部"]
ENGINEERS = ["Priya Nair", "Tom Becker", "Lina Zhou", "Omar Haddad", "Sara Lind", "Ken Ito", "Ana Costa", "Ravi Rao"]
TEAMS = ["platform", "network", "database", "storage"]


def parts_rows():
    return [(f"P-{i:04d}", f"Hex bolt M{4 + i % 9}", SUPPLIERS[i % 6], 10 + 3 * i, i % 40) for i in range(300)]


def travel_rows():
    return [(DEPARTMENTS[i % 12], f"员工{i}", f"Q{i % 4 + 1}", 1000 + 7 * i) for i in range(240)]


def oncall_rows():
    start = dt.date(2025, 1, 1)
    return [((start + dt.timedelta(days=i)).isoformat(), ENGINEERS[i % 8], TEAMS[i % 4], (i * 7) % 5 + i % 4, i % 9 + 1)
            for i in range(400)]


def write_workbooks(folder: Path) -> None:
    from tests.workbooks import write_sheet

    write_sheet(folder / "parts.xlsx", "Price list", ["Part number", "Description", "Supplier", "Unit price (EUR)", "Stock"],
                parts_rows())
    write_sheet(folder / "travel.xlsx", "差旅预算", ["部门", "员工", "季度", "差旅预算（元）"], travel_rows())
    with (folder / "oncall.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Date", "Engineer", "Team", "Incidents", "Hours"])
        writer.writerows(oncall_rows())


def questions() -> list[tuple[str, list[str]]]:
    """(question, the values its answer must show)."""
    parts, travel, oncall = parts_rows(), travel_rows(), oncall_rows()

    def top(pairs):
        totals: dict[str, int] = {}
        for key, value in pairs:
            totals[key] = totals.get(key, 0) + value
        return sorted(totals, key=totals.get, reverse=True)

    dept_total = top((d, b) for d, _, _, b in travel)
    team_incidents = top((t, n) for _, _, t, n, _ in oncall)
    hours = top((e, h) for _, e, _, _, h in oncall)
    borg = [p for p in parts if p[2] == "Borg Metals"]
    return [
        ("What is the unit price of part P-0042?", ["136"]),
        ("Which supplier supplies part P-0123?", [parts[123][2]]),
        ("How many different parts come from Cobalt Supply?", [str(sum(p[2] == "Cobalt Supply" for p in parts))]),
        ("How many parts have a stock of 0?", [str(sum(p[4] == 0 for p in parts))]),
        ("What is the total stock of all parts from Acme Fasteners?", [str(sum(p[4] for p in parts if p[2] == "Acme Fasteners"))]),
        ("Which part has the highest unit price?", ["P-0299"]),
        ("What is the average unit price of parts from Borg Metals?", [f"{sum(p[3] for p in borg) / len(borg):g}"]),
        ("List the 3 most expensive parts.", ["P-0299", "P-0298", "P-0297"]),
        ("财务部的差旅预算总额是多少？", [str(sum(b for d, _, _, b in travel if d == "财务部"))]),
        ("哪个部门的差旅预算总额最高？", [dept_total[0]]),
        ("员工57的差旅预算是多少？", [str(1000 + 7 * 57)]),
        ("研发部有多少条差旅预算记录？", [str(sum(d == "研发部" for d, *_ in travel))]),
        ("Q1季度的差旅预算总额是多少？", [str(sum(b for _, _, q, b in travel if q == "Q1"))]),
        ("What is the travel budget of 员工100?", [str(1000 + 700)]),
        ("How many incidents did the platform team have in total?", [str(sum(n for _, _, t, n, _ in oncall if t == "platform"))]),
        ("Who was on call on 2025-03-15?", [next(e for d, e, *_ in oncall if d == "2025-03-15")]),
        ("Which engineer logged the most on-call hours?", [hours[0]]),
        ("How many on-call shifts did Priya Nair have?", [str(sum(e == "Priya Nair" for _, e, *_ in oncall))]),
        ("2025年2月共有多少次事故？", [str(sum(n for d, _, _, n, _ in oncall if d.startswith("2025-02")))]),
        ("Which 2 teams had the most incidents?", team_incidents[:2]),
    ]


def verdict(answer: str, abstained: bool, expected: list[str]) -> str:
    if abstained:
        return "declined"
    ok = all(re.search(rf"(?<![\w.-]){re.escape(v)}(?![\w-]|\.\d)", answer) for v in expected)
    return "right" if ok else "wrong"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, default=0)
    args = parser.parse_args()
    from assistant.composition import Assistant
    from assistant.core.principals import ANONYMOUS
    from assistant.core.settings import Settings
    from assistant.tables.files import tables_file
    from ingest.pipeline import Ingestor
    from tests.conftest import open_resources

    cases = questions()[: args.only or None]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "docs").mkdir()
        write_workbooks(root / "docs")
        model = REPO / "var/models/gguf/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
        settings = Settings(_env_file=None, data_dir=root / "var", llm_temperature=0.0,
                            **({"llm_model_path": model} if model.exists() else {}))
        res = open_resources(settings)
        ingestor = Ingestor(res)
        started = time.perf_counter()
        outcomes = ingestor.sync(root / "docs")
        ingestor.close()
        print(f"ingested {[(o.source, o.status, o.chunks) for o in outcomes]} in {time.perf_counter() - started:.1f} s; "
              f"tables: {sum(tables_file(settings.tables_dir, d).exists() for d in [_doc(o.uri) for o in outcomes])}", flush=True)
        answerer = Assistant.build(res).answerer
        counts = {"right": 0, "wrong": 0, "declined": 0, "sql refused or failed": 0}
        for n, (question, expected) in enumerate(cases, 1):
            started = time.perf_counter()
            answer = asyncio.run(answerer.answer(question, principal=ANONYMOUS))
            kind = verdict(answer.answer, answer.abstained, expected)
            counts[kind] += 1
            refused = answer.abstained and ("could answer this" in answer.answer or "无法通过查询" in answer.answer)
            counts["sql refused or failed"] += refused
            # The query is in the citation's snippet (the source preview), not in the answer.
            shown = answer.citations[0].snippet if answer.citations else answer.answer
            print(f"{n:2d}. {kind:8s} {time.perf_counter() - started:5.1f} s  {question}  expected {expected}\n"
                  f"    -> {' '.join(shown.split())[:220]}", flush=True)
        res.close()
    total = len(cases)
    print("\n| figure | value |\n|---|---|")
    for key, value in counts.items():
        print(f"| {key} | {value} of {total} |")
    print(f"| right share | {counts['right'] / total:.2f} |")


def _doc(uri: str) -> str:
    from ingest.pipeline import document_id

    return document_id(uri)


if __name__ == "__main__":
    main()
