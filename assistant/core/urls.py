"""URL types of the settings: each is checked when the settings are read, with pydantic's URL types
(`HttpUrl`, `RedisDsn`, `AnyUrl`) or SQLAlchemy's URL parser, and kept as the string it was given, so
that clients get exactly the configured text (pydantic would add a trailing slash to a bare host).

A bad URL is refused naming the environment variable and what it must be, e.g. `ASSISTANT_QDRANT_URL
is not an http(s) URL (scheme http or https, then a host)`; not the value, which may hold a password.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, AnyUrl, HttpUrl, RedisDsn, TypeAdapter, ValidationError, ValidationInfo
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from assistant.core.settings.env_names import env_name_of_field

# Schemes a Celery broker may use here: RabbitMQ (production) or Redis.
BROKER_SCHEMES = ("amqp", "amqps", "pyamqp", "redis", "rediss")
# SQLAlchemy dialects the product's schema and migrations support.
DATABASE_DIALECTS = ("sqlite", "postgresql")


def _refusal(info: ValidationInfo, what: str) -> ValueError:
    name = env_name_of_field((info.config or {}).get("title"), info.field_name or "")
    return ValueError(f"{name} is not {what}")


def _pydantic_url(kind: type, what: str, schemes: tuple[str, ...] = ()) -> Callable[[str, ValidationInfo], str]:
    adapter: TypeAdapter[Any] = TypeAdapter(kind)

    def check(value: str, info: ValidationInfo) -> str:
        try:
            url = adapter.validate_python(value)
        except ValidationError:
            raise _refusal(info, what) from None
        if schemes and url.scheme not in schemes:
            raise _refusal(info, what)
        return value

    return check


def _database_url(value: str, info: ValidationInfo) -> str:
    what = "an SQLAlchemy URL of SQLite or PostgreSQL (sqlite:///PATH, postgresql+psycopg://USER:PASSWORD@HOST/DB)"
    try:
        url = make_url(value)
    except ArgumentError:
        raise _refusal(info, what) from None
    if url.get_backend_name() not in DATABASE_DIALECTS:
        raise _refusal(info, what)
    return value


HttpUrlText = Annotated[str, AfterValidator(_pydantic_url(HttpUrl, "an http(s) URL (scheme http or https, then a host)"))]
RedisUrlText = Annotated[str, AfterValidator(_pydantic_url(RedisDsn, "a Redis URL (redis:// or rediss://)"))]
BrokerUrlText = Annotated[
    str, AfterValidator(_pydantic_url(AnyUrl, f"a Celery broker URL ({', '.join(BROKER_SCHEMES)})", BROKER_SCHEMES))
]
AnyUrlText = Annotated[str, AfterValidator(_pydantic_url(AnyUrl, "a URL (scheme://...)"))]
DatabaseUrlText = Annotated[str, AfterValidator(_database_url)]
