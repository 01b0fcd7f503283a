"""Maps every AssistantError to its HTTP status and the JSON shape `{"error": {"code", "message"}}` (OpenAI's under /v1/)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from assistant.core.errors import AssistantError


def error_body(code: str, message: str) -> dict:
    """The product's error JSON."""
    return {"error": {"code": code, "message": message}}


# OpenAI's error `type` per HTTP status (the `openai` client picks its exception class by status).
OPENAI_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 409: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
}
OPENAI_PREFIX = "/v1/"
# Our stable code for an HTTP error raised by the framework (unknown route, wrong method...).
HTTP_ERROR_CODES = {
    400: "invalid_request", 401: "unauthenticated", 403: "permission_denied", 404: "not_found", 405: "method_not_allowed",
    413: "payload_too_large",
}


def openai_error_body(code: str, message: str, status: int) -> dict:
    """The OpenAI error JSON `{"error": {"message", "type", "code"}}` of the `/v1` endpoints."""
    return {"error": {"message": message, "type": OPENAI_ERROR_TYPES.get(status, "server_error"), "code": code}}


def _error(request: Request, code: str, message: str, status: int, headers: dict | None = None) -> JSONResponse:
    if request.url.path.startswith(OPENAI_PREFIX):
        if status == 422:
            status = 400  # OpenAI-compatible servers answer malformed bodies with 400
        return JSONResponse(openai_error_body(code, message, status), status_code=status, headers=headers)
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


def error_response(request: Request, exc: AssistantError) -> JSONResponse:
    """The JSON response of one of our errors, in the shape the request's path expects."""
    return _error(request, exc.code, exc.message, exc.http_status, exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register handlers for our errors, validation errors and plain HTTP errors."""

    @app.exception_handler(AssistantError)
    async def _assistant_error(request: Request, exc: AssistantError) -> JSONResponse:
        return error_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(_problem(e) for e in exc.errors())
        return _error(request, "invalid_request", problems, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = HTTP_ERROR_CODES.get(exc.status_code, "http_error")
        message = str(exc.detail)
        if exc.status_code == 400 and message == "There was an error parsing the body":
            # FastAPI's words for a body it could not decode (e.g. bytes that are not UTF-8).
            message = "the request body could not be read: send UTF-8 JSON"
        return _error(request, code, message, exc.status_code, exc.headers)


def _problem(error: dict) -> str:
    # Pydantic's error as one phrase; a body that is not JSON at all gets a sentence of its own
    # (its `loc` is the character position, which alone reads like a field name).
    loc = error.get("loc", ())
    if error.get("type") == "json_invalid":
        reason = (error.get("ctx") or {}).get("error", "")
        at = f" at character {loc[1]}" if len(loc) > 1 else ""
        return f"the request body is not valid JSON ({reason}{at})"
    if tuple(loc) == ("body",) and error.get("type") in ("model_attributes_type", "dict_type"):
        # A body sent as text/plain (or any non-JSON type) reaches the model as a string.
        return "the request body must be a JSON object, sent with Content-Type: application/json"
    return f"{'.'.join(str(p) for p in loc[1:]) or 'body'}: {error.get('msg')}"
