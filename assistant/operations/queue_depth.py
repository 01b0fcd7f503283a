"""How many task messages wait in the Celery queue (the figure worker autoscaling follows)."""

from __future__ import annotations

import logging

import redis

from assistant.core.settings import Settings

log = logging.getLogger(__name__)


def celery_queue_depth(settings: Settings, *, timeout_s: float = 1.0) -> int | None:
    """Messages waiting in `settings.celery_queue` on a Redis broker (Celery's Redis transport keeps a
    queue as a list named after it: `LLEN`). None with the in-process worker, another broker, or a
    broker that does not answer within `timeout_s` seconds."""
    if settings.jobs.backend != "celery" or not settings.jobs.broker_url.startswith(("redis://", "rediss://")):
        return None
    try:
        client = redis.Redis.from_url(settings.jobs.broker_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        try:
            return int(client.llen(settings.jobs.celery_queue))
        finally:
            client.close()
    except redis.RedisError as exc:
        log.warning("metrics: the Celery queue length could not be read: %s", type(exc).__name__)
        return None
