"""One base error with stable codes; the API maps each code to an HTTP status in one handler."""

from __future__ import annotations


class AssistantError(Exception):
    """Base error. `code` is stable (clients match on it); `message` names the thing, rule and value."""

    code = "internal_error"
    http_status = 500

    def __init__(self, message: str, *, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.headers = headers or {}


class ConfigError(AssistantError, ValueError):
    """The configuration is invalid or impossible."""

    code = "config_invalid"
    http_status = 500


class PayloadTooLargeError(AssistantError):
    """The request body is larger than the server accepts (`ASSISTANT_MAX_REQUEST_BYTES`)."""

    code = "payload_too_large"
    http_status = 413


class NotFoundError(AssistantError):
    """The thing does not exist, or the reader may not see it (never 'forbidden')."""

    code = "not_found"
    http_status = 404


class InvalidRequestError(AssistantError):
    """The caller sent something the product cannot use."""

    code = "invalid_request"
    http_status = 400


def not_utf8(what: str, exc: UnicodeDecodeError) -> InvalidRequestError:
    """The error for a file `what` (e.g. `ACL manifest acl.yaml`) that is not UTF-8 text, naming the
    first undecodable byte and its offset, as every reader of a user's file reports it."""
    return InvalidRequestError(
        f"{what}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
    )


class AuthenticationError(AssistantError):
    """No valid credentials were presented."""

    code = "unauthenticated"
    http_status = 401


class PermissionDeniedError(AssistantError):
    """The caller is known but lacks a role (admin actions only; documents answer not_found)."""

    code = "permission_denied"
    http_status = 403


class ConflictError(AssistantError):
    """The request conflicts with existing state (e.g. mixing embedding dimensions)."""

    code = "conflict"
    http_status = 409


class OverloadedError(AssistantError):
    """Too much work queued; retry after `retry_after_s`."""

    code = "overloaded"
    http_status = 429

    def __init__(self, message: str, *, retry_after_s: int = 5):
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})


class TooManyAttemptsError(AssistantError):
    """Too many failed sign-ins for one account; retry after `retry_after_s`."""

    code = "too_many_attempts"
    http_status = 429

    def __init__(self, message: str, *, retry_after_s: int = 60):
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})


class UpstreamUnavailableError(AssistantError):
    """The LLM server (or another upstream) cannot be reached right now."""

    code = "upstream_unavailable"
    http_status = 503

    def __init__(self, message: str, *, retry_after_s: int = 10):
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})


class IngestError(AssistantError):
    """A document could not be ingested; `status` is the job status it maps to.

    `attachments` ((file name, bytes) pairs) are files found inside the document before it failed,
    e.g. the attachments of an e-mail without text: they are still ingested as their own documents.
    """

    code = "ingest_failed"
    http_status = 422

    def __init__(self, message: str, *, status: str = "failed", attachments: list[tuple[str, bytes]] | None = None):
        super().__init__(message)
        self.status = status
        self.attachments = attachments or []
