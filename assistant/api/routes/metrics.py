"""Prometheus metrics at `/metrics`, for admins, the scraper's bearer token (`metrics_token`) or the
operator token (`assistant.auth.operator_token`)."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from assistant.api.operator_auth import require_token_or_admin
from assistant.auth.operator_token import is_operator_token
from assistant.operations.metrics import OperationsCollector, adapter_in_use, exposition
from assistant.operations.queue_depth import celery_queue_depth
from assistant.operations.store import operations_counts

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """The Prometheus text exposition (docs/operations.md lists the metrics).

    Raises:
        AuthenticationError: no accepted token and no signed-in caller (401).
        PermissionDeniedError: a signed-in caller who is not an admin (403).
    """
    state = request.app.state
    settings = state.settings

    def accepts(value: str) -> bool:
        token = settings.observability.metrics_token
        if token is not None and hmac.compare_digest(value.encode(), token.get_secret_value().encode()):
            return True
        return is_operator_token(settings, value)

    await require_token_or_admin(request, accepts)
    assistant = getattr(state, "assistant", None)  # None until the lifespan has composed it
    resources = getattr(assistant, "resources", None)
    collector = OperationsCollector(
        adapter=lambda: adapter_in_use(resources.db if resources is not None else None),
        admission_queued=lambda: assistant.answerer.limiter.queued if assistant is not None else 0,
        breaker_state=lambda: resources.llm_breaker_state() if resources is not None else "closed",
        sql_figures=lambda: operations_counts(resources.db),
        queue_depth=lambda: celery_queue_depth(settings),
    )
    body, content_type = await run_in_threadpool(exposition, collector, settings.observability.prometheus_multiproc_dir)
    return Response(body, media_type=content_type)
