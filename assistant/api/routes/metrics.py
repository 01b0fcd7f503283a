"""Prometheus metrics at `/metrics`, for admins, the scraper's bearer token (`metrics_token`) or the
operator token (`assistant.core.operations.operator_token`)."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from assistant.api.operator_auth import require_token_or_admin
from assistant.core.db.stats import operations_counts
from assistant.core.metrics import OperationsCollector, exposition
from assistant.core.operations.operator_token import is_operator_token
from assistant.core.queue_depth import celery_queue_depth

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
        token = settings.metrics_token
        if token is not None and hmac.compare_digest(value.encode(), token.get_secret_value().encode()):
            return True
        return is_operator_token(settings, value)

    await require_token_or_admin(request, accepts)
    collector = OperationsCollector(
        state,
        sql_figures=lambda: operations_counts(state.assistant.resources.db),
        queue_depth=lambda: celery_queue_depth(settings),
    )
    body, content_type = await run_in_threadpool(exposition, collector, settings.prometheus_multiproc_dir)
    return Response(body, media_type=content_type)
