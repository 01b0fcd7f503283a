"""The interactive API reference, `GET /api/docs`: Swagger UI over `/api/openapi.json`, for signed-in callers.

The appliance is offline, so Swagger UI's script and stylesheet come from the `swagger-ui-py` wheel
(its `swagger_ui/static` folder, Swagger UI 5, which renders the OpenAPI 3.1 schema FastAPI emits;
`swagger-ui-bundle` ships Swagger UI 4, which cannot) and are served here, never from a CDN. The page
starts Swagger UI from a script file rather than an inline script, so the site's CSP (`script-src
'self'`) still holds; only inline styles, which Swagger UI sets on its elements, are allowed on it.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from assistant.core.errors import ConfigError, NotFoundError

router = APIRouter(prefix="/api/docs", include_in_schema=False)

# The Swagger UI files the page loads, and their media types (nothing else of the wheel is served).
ASSETS = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "text/javascript",
    "favicon-32x32.png": "image/png",
}
# The site's policy (assistant.api.security_headers) plus the inline styles Swagger UI sets on elements.
PAGE_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Private assistant API</title>
<link rel="stylesheet" href="/api/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/api/docs/assets/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/api/docs/assets/swagger-ui-bundle.js"></script>
<script src="/api/docs/start.js"></script>
</body>
</html>
"""
# Requests sent from the page carry the session cookie; a state-changing one needs the CSRF token
# (assistant.api.deps), which /api/auth/me returns, so it is added to every request.
START = """\
let csrf = null;
fetch("/api/auth/me", {credentials: "same-origin"}).then(r => r.json()).then(me => { csrf = me.csrf_token; });
window.ui = SwaggerUIBundle({
  url: "/api/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  requestInterceptor: (req) => { if (csrf) req.headers["X-CSRF-Token"] = csrf; return req; },
});
"""


@cache
def swagger_ui_dir() -> Path:
    """The folder of Swagger UI's files inside the installed `swagger-ui-py` package (found without
    importing it: its `__init__` loads web framework adapters we do not use).

    Raises:
        ConfigError: the package is not installed (`make install` installs it).
    """
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the API docs page needs the swagger-ui-py package: run `make install`")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


@router.get("")
def docs_page() -> HTMLResponse:
    """The Swagger UI page over this server's OpenAPI schema."""
    return HTMLResponse(PAGE, headers={"Content-Security-Policy": PAGE_CSP})


@router.get("/start.js")
def docs_start() -> Response:
    """The script that starts Swagger UI on `/api/openapi.json`."""
    return Response(START, media_type="text/javascript")


@router.get("/assets/{name}")
def docs_asset(name: str) -> FileResponse:
    """One of Swagger UI's files (`ASSETS`).

    Raises:
        NotFoundError: any other name.
        ConfigError: swagger-ui-py is not installed.
    """
    if name not in ASSETS:
        raise NotFoundError(f"no API docs asset {name!r}")
    return FileResponse(swagger_ui_dir() / name, media_type=ASSETS[name])
