"""Releasing a candidate that passed the gate: it becomes the canary of its audience and is loaded into
the model server (vLLM's runtime LoRA endpoint, or the in-process router)."""

from __future__ import annotations

from assistant.adapters.release import AdapterPublisher, promote_and_publish
from assistant.adapters.store import AdapterRecord, Release
from assistant.core.db.session import Database


def publish_candidate(db: Database, adapter: AdapterRecord, *, publisher: AdapterPublisher, by: str) -> Release:
    """Make `adapter` (a candidate that passed the gate) the canary of its audience, retiring the canary
    it replaces, and load it into the model server; the live adapter keeps serving everyone else.

    Raises:
        ConflictError: the adapter is no longer a candidate.
        UpstreamUnavailableError: the model server refused to load it.
    """
    return promote_and_publish(db, adapter.id, by=by, publisher=publisher, to="canary")
