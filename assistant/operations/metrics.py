"""The Prometheus exposition at `/metrics`: the metrics recorded as the processes work
(`assistant.core.metrics`, summed over processes in multiprocess mode) and the figures read at scrape
time (`OperationsCollector`).

Reference for multiprocess mode: https://prometheus.github.io/client_python/multiprocess/
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from assistant.adapters.store import serving_adapters
from assistant.core.db.session import Database
from assistant.core.metrics import BREAKER_STATES

log = logging.getLogger(__name__)


def adapter_in_use(db: Database | None) -> str:
    """The name of the LoRA adapter the answers are generated with, or "base" for the base model.

    Args:
        db: the process's database (or None before the resources are open).

    Returns:
        The registry's serving adapters as `status:name` joined by commas (e.g. `live:everyone-3,canary:
        everyone-4`), or "base" when none is live or canary (or there is no database yet).
    """
    if db is None:
        return "base"
    serving = sorted(serving_adapters(db), key=lambda a: (a.status != "live", a.name))
    return ",".join(f"{a.status}:{a.name}" for a in serving) or "base"


@dataclass(eq=False)  # a prometheus-client registry keys collectors by identity
class OperationsCollector:
    """Figures read at scrape time from where their truth lives (a prometheus-client custom collector).

    Each figure comes from a callable the caller passes, so that this module knows nothing of how the
    process is composed (the API route builds them from its state; a benchmark from its resources).

    Args:
        adapter: returns what `adapter_in_use` returns (e.g. `live:everyone-3`, or "base").
        admission_queued: returns the requests of this process waiting for a model slot.
        breaker_state: returns the LLM circuit breaker's state, one of `BREAKER_STATES` (without loading
            the model: "closed" when none is loaded).
        sql_figures: returns `{"jobs": {(kind, status): n}, "helpdesk_decisions": {(category, decision): n},
            "helpdesk_outcomes": {(category, outcome): n}}` from the database (`assistant.operations.store.operations_counts`).
        queue_depth: returns the messages waiting in the Celery queue, or None when not measurable.
    """

    adapter: Callable[[], str]
    admission_queued: Callable[[], int]
    breaker_state: Callable[[], str]
    sql_figures: Callable[[], dict]
    queue_depth: Callable[[], int | None]

    def collect(self) -> Iterable:
        """The gauges of one scrape (prometheus-client calls this)."""
        info = InfoMetricFamily("assistant_adapter", "The LoRA adapter answers are generated with ('base': none)")
        info.add_metric([], {"adapter": self.adapter()})
        yield info
        waiting = GaugeMetricFamily(
            "assistant_llm_queue_depth", "Requests of this API process waiting for a model slot (admission queue)"
        )
        waiting.add_metric([], float(self.admission_queued()))
        yield waiting
        state = GaugeMetricFamily(
            "assistant_llm_circuit_state", "1 for the LLM circuit breaker's current state in this process", labels=["state"]
        )
        current = self.breaker_state()
        for name in BREAKER_STATES:
            state.add_metric([name], 1.0 if name == current else 0.0)
        yield state
        depth = self.queue_depth()
        if depth is not None:
            celery = GaugeMetricFamily("assistant_job_queue_depth", "Task messages waiting in the Celery queue")
            celery.add_metric([], float(depth))
            yield celery
        try:
            figures = self.sql_figures()
        except Exception as exc:  # a scrape must still answer while the database is away
            log.warning("metrics: the database figures could not be read: %s", type(exc).__name__)
            return
        yield _gauge("assistant_jobs", "Jobs in the database, by kind and status (done/failed: outcomes so far)",
                     ["kind", "status"], figures["jobs"])
        yield _gauge("assistant_helpdesk_tickets", "Helpdesk tickets received, by category and decision "
                     "(auto_reply, escalate; 'none' while pending)", ["category", "decision"], figures["helpdesk_decisions"])
        yield _gauge("assistant_helpdesk_outcomes", "Helpdesk tickets resolved by an agent, by category and outcome "
                     "(accepted, edited, rejected)", ["category", "outcome"], figures["helpdesk_outcomes"])


def _gauge(name: str, documentation: str, labels: list[str], values: dict[tuple, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for key, n in sorted(values.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        family.add_metric([str(k) if k is not None else "none" for k in key], float(n))
    return family


def exposition(collector: OperationsCollector | None, multiproc_dir: Path | None) -> tuple[bytes, str]:
    """The text Prometheus scrapes: the recorded metrics (summed over processes in multiprocess mode)
    followed by the scrape-time figures.

    Args:
        collector: scrape-time figures, or None.
        multiproc_dir: prometheus-client's multiprocess folder when several processes serve, else None.

    Returns:
        `(body, content_type)` in the Prometheus text format 0.0.4.
    """
    if multiproc_dir is not None:
        recorded = CollectorRegistry()
        MultiProcessCollector(recorded, path=str(multiproc_dir))
    else:
        recorded = REGISTRY
    body = generate_latest(recorded)
    if collector is not None:
        live = CollectorRegistry()
        live.register(collector)
        body += generate_latest(live)
    return body, CONTENT_TYPE_LATEST
