"""Helpdesk decisions on a labelled ticket set: auto-reply precision, coverage, time per ticket, and the
confidence's reliability table and threshold trade-off.

Every ticket goes through the product's ticket flow (`assistant.helpdesk.tickets.submit_ticket`: the
requester's retrieval, the grounded reply, confidence and decision) with the configured chat model
(`ASSISTANT_LLM_*`; the embedded default unless set), over an index of the handbook pages the tickets'
answer files live in (their folders, whole) plus `--distractors` other handbook pages drawn with `--seed`.

- precision: auto-replies that cite one of the ticket's answer files, over all auto-replies;
- coverage: answerable tickets (`kind` howto) auto-replied with such a citation, over answerable tickets;
- escalated: uncovered and action tickets sent to an agent, over those tickets;
- reliability: per confidence bin, tickets and the share whose reply cites an answer file;
- trade-off: precision and coverage had the threshold been each of `--thresholds` (the other
  conditions of the decision unchanged);
- questions of several parts (issue 42), per `split` of the tickets (`dev`, `heldout`, or `main` for
  tickets without one): `auto_right` (auto-replied, expected so, citing an answer file of every labelled
  part), `auto_wrong` (auto-replied otherwise), `escalated`, `empty_drafts` (answerable tickets escalated
  with a reply that cites nothing), `dropped_parts` (labelled parts of a reply that cites something,
  neither answered, i.e. an answer file of theirs cited and the part not reported uncovered, nor named
  as not covered) over `parts`, and `multi_part` (tickets `answering.parts` splits).

`--tickets` may be given more than once (e.g. the labelled set and `tests/data/helpdesk_multipart_tickets.jsonl`,
whose tickets label each part with its answer files, `[]` for a part the documents do not cover), and
`--multipart-only` keeps the tickets that are split into several parts or label their parts.

Run: PYTHONPATH=. python bench/bench_helpdesk.py [--tickets tests/data/helpdesk_tickets.jsonl ...] [--multipart-only] [--limit N] [--rows OUT.jsonl]
     PYTHONPATH=. python bench/bench_helpdesk.py --report OUT.jsonl   (the figures of saved rows)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from assistant.answering.parts import split_question
from assistant.auth.accounts import create_user
from assistant.auth.api_keys import create_api_key, principal_for_api_key
from assistant.composition import Assistant
from assistant.core.resources import Resources
from assistant.core.settings import Settings
from assistant.helpdesk.tickets import BLOCKING, Collaborators, TicketRequest, submit_ticket, ticket_question
from ingest.pipeline import Ingestor

REPO = Path(__file__).resolve().parents[1]
HANDBOOK = (REPO.parent / "shared" / "corpus" / "handbook-en" / "sourcegraph-handbook" / "content").resolve()
BINS = (0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001)


def build_folder(tickets: list[dict], dst: Path, *, distractors: int, seed: int) -> int:
    """Copy the folders of the tickets' answer files and `distractors` other handbook pages into `dst`."""
    wanted: set[Path] = set()
    for ticket in tickets:
        for rel in ticket["answer_files"]:
            wanted |= set((HANDBOOK / rel).parent.glob("*.md"))
    others = sorted(set(HANDBOOK.rglob("*.md")) - wanted)
    wanted |= set(random.Random(seed).sample(others, min(distractors, len(others))))
    for path in wanted:
        target = dst / path.relative_to(HANDBOOK)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return len(wanted)


def cites_answer(row: dict) -> bool:
    """Whether the reply cites one of the ticket's answer files."""
    return any(c["source"] in row["answer_files"] for c in row["citations"])


def decided(row: dict, threshold: float) -> bool:
    """Whether the ticket would be auto-replied at `threshold` (the other conditions as they were)."""
    others = [r for r in row["reasons"] if r["code"] in BLOCKING and r["code"] != "low_confidence"]
    return not others and bool(row["citations"]) and row["confidence"] >= threshold


def answerable(row: dict) -> bool:
    """Whether the documents answer the ticket, or one of its labelled parts."""
    return row["kind"] == "howto" or any(p["answer_files"] for p in row.get("parts", []))


def part_outcomes(row: dict) -> list[str]:
    """Per labelled part of `row`: `answered`, `named` (reported as not covered) or `dropped` (neither,
    in a reply that cites something); `lost` when the reply cites nothing at all (the whole ticket
    declined). The product's parts (`evidence.parts`) are matched to the labels by position."""
    cited = {c["source"] for c in row["citations"]}
    found = (row.get("evidence") or {}).get("parts") or []
    out = []
    for i, label in enumerate(row.get("parts", [])):
        reported = found[i]["covered"] if len(found) == len(row["parts"]) else None
        if not cited:
            out.append("lost")
        elif reported is False:
            out.append("named")
        elif set(label["answer_files"]) & cited:
            out.append("answered")
        else:
            out.append("dropped")
    return out


def parts_report(rows: list[dict]) -> dict:
    """The multi-part figures of `rows` (module docstring), per split."""
    out = {}
    for split in sorted({r.get("split", "main") for r in rows}):
        chosen = [r for r in rows if r.get("split", "main") == split]
        auto = [r for r in chosen if r["decision"] == "auto_reply"]
        right = [r for r in auto if r["expect"] == "auto_reply" and cites_answer(r)
                 and all(o == "answered" for o in part_outcomes(r) if o)]
        outcomes = [o for r in chosen for o in part_outcomes(r)]
        out[split] = {
            "tickets": len(chosen), "multi_part": sum(len(split_question(ticket_question(r["subject"], r["body"]))) > 1 for r in chosen),
            "auto_right": len(right), "auto_wrong": len(auto) - len(right),
            "escalated": sum(r["decision"] == "needs_agent" for r in chosen),
            "empty_drafts": sum(r["decision"] == "needs_agent" and answerable(r) and not r["citations"] for r in chosen),
            "parts": len(outcomes), "dropped_parts": outcomes.count("dropped"), "named_parts": outcomes.count("named"),
            "answered_parts": outcomes.count("answered"), "lost_parts": outcomes.count("lost"),
        }
    return out


def report(rows: list[dict], threshold: float, thresholds: list[float]) -> dict:
    """The figures over `rows` (one per ticket with its decision): see the module's docstring."""
    auto = [r for r in rows if r["decision"] == "auto_reply"]
    answerable = [r for r in rows if r["kind"] == "howto"]
    agent_kinds = [r for r in rows if r["kind"] in ("action", "uncovered")]
    times = sorted(r["duration_s"] for r in rows)
    out = {
        "tickets": len(rows), "answerable": len(answerable), "threshold": threshold,
        "auto_replies": len(auto),
        "precision": sum(cites_answer(r) for r in auto) / len(auto) if auto else None,
        "coverage": sum(r["decision"] == "auto_reply" and cites_answer(r) for r in answerable) / len(answerable)
        if answerable else None,
        "escalated": sum(r["decision"] == "needs_agent" for r in agent_kinds) / len(agent_kinds) if agent_kinds else None,
        "seconds_per_ticket": {"mean": round(statistics.mean(times), 2), "median": round(statistics.median(times), 2),
                               "p90": round(times[int(0.9 * (len(times) - 1))], 2)},
        "reliability": [], "trade_off": [], "parts": parts_report(rows),
    }
    for lo, hi in zip(BINS, BINS[1:]):
        in_bin = [r for r in rows if lo <= r["confidence"] < hi]
        if in_bin:
            out["reliability"].append({"bin": f"[{lo:.1f}, {min(hi, 1.0):.1f}{']' if hi > 1 else ')'}", "tickets": len(in_bin),
                                       "cite_answer_file": round(sum(cites_answer(r) for r in in_bin) / len(in_bin), 3)})
    for t in thresholds:
        chosen = [r for r in rows if decided(r, t)]
        out["trade_off"].append({
            "threshold": t, "auto_replies": len(chosen),
            "precision": round(sum(cites_answer(r) for r in chosen) / len(chosen), 3) if chosen else None,
            "coverage": round(sum(decided(r, t) and cites_answer(r) for r in answerable) / len(answerable), 3)
            if answerable else None,
        })
    return out


async def run(tickets: list[dict], parts: Collaborators, key, out: Path | None) -> list[dict]:
    """Each ticket through `submit_ticket`, printed as it is decided and appended to `out` (JSONL)."""
    rows = []
    for ticket in tickets:
        request = TicketRequest(subject=ticket["subject"], body=ticket["body"], requester=ticket.get("requester", "bench-user"),
                                category=ticket.get("category"), external_id=ticket["id"])
        started = time.perf_counter()
        record, _ = await submit_ticket(request, key=key, idempotency_key=f"{ticket['id']}-{time.time_ns()}", parts=parts)
        rows.append({**ticket, "decision": record.decision, "confidence": record.confidence, "citations": record.citations,
                     "reasons": record.reasons, "reply": record.reply, "evidence": record.evidence, "duration_s": round(time.perf_counter() - started, 2)})
        row = rows[-1]
        if out is not None:
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{ticket['id']:<12} {row['decision']:<11} conf {row['confidence']:.2f} cites answer {cites_answer(row)!s:<5} "
              f"{row['duration_s']:6.1f} s  {[r['code'] for r in row['reasons']]}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=Path, action="append", help="JSONL tickets (repeatable); default: the labelled set")
    parser.add_argument("--multipart-only", action="store_true", help="only tickets split into several parts or labelled by part")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tickets (0 = all)")
    parser.add_argument("--distractors", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--thresholds", type=float, nargs="*", default=[0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    parser.add_argument("--rows", type=Path, help="append each decided ticket here (JSONL) as it is decided")
    parser.add_argument("--report", type=Path, help="only print the figures of rows saved with --rows")
    parser.add_argument("--threshold", type=float, help="the threshold the saved rows were decided with (--report)")
    args = parser.parse_args()
    if args.report:
        rows = [json.loads(line) for line in args.report.read_text(encoding="utf-8").splitlines() if line.strip()]
        threshold = args.threshold if args.threshold is not None else Settings(_env_file=None).helpdesk.auto_reply_threshold
        print(json.dumps(report(rows, threshold, args.thresholds), indent=1))
        return
    tickets = [json.loads(line) for path in args.tickets or [REPO / "tests" / "data" / "helpdesk_tickets.jsonl"]
               for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.multipart_only:
        tickets = [t for t in tickets if "parts" in t or len(split_question(ticket_question(t["subject"], t["body"]))) > 1]
    if args.limit:
        tickets = tickets[: args.limit]
    with tempfile.TemporaryDirectory(prefix="bench-helpdesk-") as tmp:
        folder = Path(tmp) / "docs"
        n_files = build_folder(tickets, folder, distractors=args.distractors, seed=args.seed)
        settings = Settings(_env_file=None, data_dir=Path(tmp) / "var", answer_cache_entries=0)
        res = Resources.open(settings)
        try:
            started = time.perf_counter()
            Ingestor(res).sync(folder)
            print(f"indexed {n_files} files in {time.perf_counter() - started:.0f} s; model {settings.llm.backend}:"
                  f"{settings.llm.openai_model if settings.llm.backend == 'openai' else settings.llm.model}", flush=True)
            create_user(res.db, "bench-user")
            key = principal_for_api_key(res.db, create_api_key(res.db, "bench-helpdesk").key)
            assistant = Assistant.build(res)
            parts = Collaborators(db=res.db, retriever=assistant.retriever, answerer=assistant.answerer,
                                  threshold=settings.helpdesk.auto_reply_threshold)
            rows = asyncio.run(run(tickets, parts, key, args.rows))
        finally:
            res.close()
    figures = report(rows, settings.helpdesk.auto_reply_threshold, args.thresholds)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
