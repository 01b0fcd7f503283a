"""The Celery task that delivers a webhook: one attempt per run, the next one scheduled with backoff
(Celery's countdown in production, a timer thread on the in-process worker)."""

from __future__ import annotations

import logging
import threading

from celery import shared_task

from assistant.core import resources
from assistant.core.jobs import register_restart
from assistant.helpdesk.delivery import attempt_delivery
from assistant.helpdesk.store import pending_delivery_ids

log = logging.getLogger(__name__)
WEBHOOK_TASK = "helpdesk.deliver_webhook"
# In process, a delivery waiting for its next attempt waited on a timer of the process that stopped.
register_restart(lambda db: [(WEBHOOK_TASK, {"delivery_id": i}) for i in pending_delivery_ids(db)])


@shared_task(name=WEBHOOK_TASK, bind=True, acks_late=True, max_retries=None)
def deliver_webhook(self, delivery_id: int) -> None:
    """Celery task: `attempt_delivery` on this process's resources; retried after its backoff."""
    res = resources.current()
    delay = attempt_delivery(res.db, delivery_id, settings=res.settings)
    if delay is None:
        return
    if res.settings.jobs.backend == "celery":
        raise self.retry(countdown=delay)
    # In process there is no broker to hold the retry: a daemon timer runs the next attempt; a restart
    # in between resubmits every pending delivery (`JobDispatcher.resume_unfinished`).
    timer = threading.Timer(delay, _run_again, args=(delivery_id,))
    timer.daemon = True
    timer.start()


def _run_again(delivery_id: int) -> None:
    try:
        deliver_webhook.run(delivery_id=delivery_id)
    except Exception:  # the attempt is recorded; the next resume picks a pending delivery up again
        log.exception("webhook delivery %s failed", delivery_id)
