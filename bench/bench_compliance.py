"""What compliance costs: audit rows appended and verified per second (SQLite and PostgreSQL), and personal
data masking throughput on handbook text, against the plain scan of the same text.

Usage: PYTHONPATH=. .venv/bin/python bench/bench_compliance.py [--rows 2000] [--pg postgresql+psycopg://...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

from assistant.compliance.audit import record_event
from assistant.compliance.audit_chain import verify_chain
from assistant.compliance.pii import mask_pii
from assistant.core.db.models import AuditEvent
from assistant.core.db.session import Database
from assistant.core.principals import Principal

HANDBOOK = Path("/work/shared/corpus/handbook-en")


def _plain_appends(db: Database, rows: int) -> float:
    """Rows per second of the same row inserted without the chain (what the trail cost before)."""
    started = time.perf_counter()
    for i in range(rows):
        with db.session() as session:
            session.add(AuditEvent(principal="plain", action="search", query=f"how do I reset my password {i}",
                                   chunk_ids=[str(uuid.uuid4()) for _ in range(5)], details={"top_k": 5}))
    return rows / (time.perf_counter() - started)


def bench_audit(url: str, rows: int) -> tuple[float, float, float]:
    """Rows per second appended without the chain, appended to the chain (one transaction each, as
    the API writes them), and verified."""
    db = Database(url)
    db.migrate()
    plain = _plain_appends(db, rows)
    with db.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events"))
    who = Principal("bench")
    started = time.perf_counter()
    for i in range(rows):
        record_event(db, principal=who, action="search", query=f"how do I reset my password {i}",
                     chunk_ids=[str(uuid.uuid4()) for _ in range(5)], doc_ids=[str(uuid.uuid4())], auth_method="session",
                     address="10.0.0.1", details={"top_k": 5})
    append_s = time.perf_counter() - started
    started = time.perf_counter()
    report = verify_chain(db)
    verify_s = time.perf_counter() - started
    assert report.ok and report.checked == rows, report
    db.dispose()
    return plain, rows / append_s, rows / verify_s


def bench_masking(limit_chars: int) -> tuple[int, float, float, int]:
    """Characters of handbook Markdown, seconds to mask them, seconds of a plain lower-casing pass, spans masked."""
    texts, total = [], 0
    for path in sorted(HANDBOOK.rglob("*.md")):
        body = path.read_text(encoding="utf-8", errors="replace")
        texts.append(body)
        total += len(body)
        if total >= limit_chars:
            break
    started = time.perf_counter()
    spans = sum(mask_pii(t).total for t in texts)
    mask_s = time.perf_counter() - started
    started = time.perf_counter()
    for t in texts:
        t.lower()
    plain_s = time.perf_counter() - started
    return total, mask_s, plain_s, spans


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--pg", default="")
    parser.add_argument("--chars", type=int, default=2_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        plain, append, verify = bench_audit(f"sqlite:///{scratch}/audit.db", args.rows)
        print(f"audit sqlite: {plain:.0f} rows/s plain inserts, {append:.0f} rows/s chained appends, "
              f"{verify:.0f} rows/s verified ({args.rows} rows)")
    if args.pg:
        name = f"bench_audit_{uuid.uuid4().hex[:8]}"
        admin = create_engine(args.pg.rsplit("/", 1)[0] + "/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            plain, append, verify = bench_audit(args.pg.rsplit("/", 1)[0] + f"/{name}", args.rows)
            print(f"audit postgresql: {plain:.0f} rows/s plain inserts, {append:.0f} rows/s chained appends, "
                  f"{verify:.0f} rows/s verified ({args.rows} rows)")
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()
    chars, mask_s, plain_s, spans = bench_masking(args.chars)
    print(f"pii masking: {chars / mask_s / 1e6:.2f} M chars/s ({chars} chars of handbook Markdown, {spans} spans masked); "
          f"{mask_s / plain_s:.0f}x a plain lower-casing pass")


if __name__ == "__main__":
    main()
