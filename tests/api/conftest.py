"""An HTTP app over a small real index (three handbook pages), shared by the API tests of a module."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from assistant.api.app import create_app
from assistant.auth.api_keys import create_api_key
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

API_FILES = [
    "departments/tech-ops/process/internal-security/passwords.md",
    "departments/tech-ops/process/internal-security/computer-standards.md",
    "departments/tech-ops/process/application_access_request.md",
]


@pytest.fixture(scope="module")
def api_resources(tmp_path_factory, citing_model):
    root = tmp_path_factory.mktemp("api")
    folder = copy_subset(HANDBOOK, root / "docs", API_FILES)
    settings = make_settings(root / "var", **citing_model)
    res = open_resources(settings)
    Ingestor(res).sync(folder)
    yield res
    res.close()


@pytest.fixture(scope="module")
def client(api_resources) -> Iterator[TestClient]:
    app = create_app(api_resources.settings, resources=api_resources)
    # Every route but health and sign-in refuses anonymous callers: this client is a service account.
    key = create_api_key(api_resources.db, "api-tests")
    with TestClient(app, headers={"Authorization": f"Bearer {key.key}"}) as c:
        yield c


def parse_sse(body: str) -> list[tuple[str, dict]]:
    """`(event, data)` pairs of a text/event-stream body."""
    events = []
    for frame in body.split("\n\n"):
        name, data = "message", ""
        for line in frame.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
        if data:
            events.append((name, json.loads(data)))
    return events


def shown_answer(events: list[tuple[str, dict]]) -> str:
    """The answer a client shows after a `/api/chat` stream, rebuilt from its draft events as
    web/src/thread.js does (docs/architecture.md, "Chat events"): tokens extend the draft, a `sentence`
    fixes sentence `index` and the rest, `revise` puts the checked text in its place, `replace` the
    whole draft."""
    segments: dict[int, str] = {}
    tail = ""
    for kind, data in events:
        if kind == "token":
            tail += data["text"]
        elif kind == "sentence":
            segments[data["index"]], tail = data["text"], data.get("rest") or ""
        elif kind == "revise":
            segments[data["index"]] = data["text"]
        elif kind == "replace":
            segments, tail = {}, data["text"]
    return "".join(segments[i] for i in sorted(segments)) + tail
