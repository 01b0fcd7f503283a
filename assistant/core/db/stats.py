"""Counts for operators (the `/metrics` scrape): jobs by outcome, helpdesk tickets by decision and outcome."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from assistant.core.db.models import HelpdeskTicket, Job
from assistant.core.db.session import Database


def operations_counts(db: Database) -> dict[str, dict[tuple[Any, ...], int]]:
    """Grouped row counts, each a few rows however large the tables (indexed columns).

    Returns:
        `{"jobs": {(kind, status): n}, "helpdesk_decisions": {(category, decision): n},
        "helpdesk_outcomes": {(category, outcome): n}}`; a None category, decision or outcome stays None
        (tickets not categorised, pending, or not resolved yet; the last are left out of the outcomes).
    """
    with db.session() as session:
        jobs = session.execute(select(Job.kind, Job.status, func.count()).group_by(Job.kind, Job.status)).all()
        decisions = session.execute(
            select(HelpdeskTicket.category, HelpdeskTicket.decision, func.count())
            .group_by(HelpdeskTicket.category, HelpdeskTicket.decision)
        ).all()
        outcomes = session.execute(
            select(HelpdeskTicket.category, HelpdeskTicket.outcome, func.count())
            .where(HelpdeskTicket.outcome.is_not(None))
            .group_by(HelpdeskTicket.category, HelpdeskTicket.outcome)
        ).all()
    return {
        "jobs": {(kind, status): n for kind, status, n in jobs},
        "helpdesk_decisions": {(category, decision): n for category, decision, n in decisions},
        "helpdesk_outcomes": {(category, outcome): n for category, outcome, n in outcomes},
    }
