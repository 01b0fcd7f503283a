"""Logging set-up: one JSON object per line (python-json-logger) carrying the request ID, or plain text.

What is logged is events and their figures (route, status, seconds, counts, IDs), never document text,
questions, answers or secrets: the JSON lines go to log collectors that the document ACLs do not cover.
"""

from __future__ import annotations

import logging
import logging.config
from typing import Any

from asgi_correlation_id import correlation_id
from pythonjsonlogger.core import RESERVED_ATTRS

from assistant.core.settings import Settings


class TextFormatter(logging.Formatter):
    """Text lines: the message, then the record's own fields as `key=value` (what JSON lines carry as
    keys), e.g. `request method=GET route=/api/search status=200 duration_s=0.012`, not a bare "request"."""

    def format(self, record: logging.LogRecord) -> str:
        head, sep, tail = super().format(record).partition("\n")  # a traceback stays below the line
        own = [f" {k}={v}" for k, v in record.__dict__.items() if k not in _NOT_FIELDS and not k.startswith("_")]
        return f"{head}{''.join(own)}{sep}{tail}"


_NOT_FIELDS = frozenset((*RESERVED_ATTRS, "color_message", "request_id"))


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every record it sees that has none: the ID of the API request it was logged
    for (asgi-correlation-id's, which its middleware sets), else None (CLI, Celery tasks)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = correlation_id.get()
        return True


def log_format(settings: Settings) -> str:
    """"json" or "text": the configured `log_format`, where "auto" means json in production."""
    if settings.observability.log_format == "auto":
        return "json" if settings.server.environment == "production" else "text"
    return settings.observability.log_format


def logging_dict(settings: Settings, *, uvicorn: bool = False) -> dict[str, Any]:
    """A `logging.config.dictConfig` dictionary for the product's loggers (`assistant`, `ingest`,
    `finetune`, Celery's) and, with `uvicorn`, the server's own (its access log is left out: the API logs
    one `request` event per request itself, with the route and the request ID).

    Args:
        settings: `log_format` and `log_level` are read.
        uvicorn: include uvicorn's loggers (for `uvicorn.run(log_config=...)`).

    Returns:
        The dictionary (version 1).
    """
    if log_format(settings) == "json":
        formatter = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "{asctime}{levelname}{name}{message}{request_id}",
            "style": "{",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            # uvicorn adds an ANSI-coloured copy of some messages for terminals: not for log collectors.
            "reserved_attrs": [*RESERVED_ATTRS, "color_message"],
        }
    else:
        formatter = {"()": f"{__name__}.TextFormatter",
                     "fmt": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"}
    handler = {"class": "logging.StreamHandler", "formatter": "default", "filters": ["request_id"],
               "stream": "ext://sys.stderr"}
    level = settings.observability.log_level.upper()
    loggers = {name: {"handlers": ["default"], "level": level, "propagate": False}
               for name in ("assistant", "ingest", "finetune", "celery")}
    # asgi-correlation-id warns when it replaces a caller's unacceptable X-Request-ID: not worth a line.
    loggers["asgi_correlation_id"] = {"level": "ERROR"}
    if uvicorn:
        loggers["uvicorn"] = {"handlers": ["default"], "level": level, "propagate": False}
        loggers["uvicorn.error"] = {"level": level}
        loggers["uvicorn.access"] = {"handlers": [], "level": "WARNING", "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {"default": formatter},
        "handlers": {"default": handler},
        "loggers": loggers,
    }


def configure_logging(settings: Settings) -> None:
    """Apply `logging_dict(settings)` to this process (the CLI's commands, Celery workers)."""
    logging.config.dictConfig(logging_dict(settings))
