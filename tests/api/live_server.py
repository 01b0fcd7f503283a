"""The real app served by uvicorn on a free port in a background thread (vLLM's `RemoteOpenAIServer` pattern),
over a small index with one restricted document.

Clients then talk HTTP to it, the official `openai` client included, with real streaming and real
concurrency (the in-process TestClient buffers a response and runs one request at a time).
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
import uvicorn
import yaml

from assistant.api.app import create_app
from assistant.auth.acl_manifest import AclManifest
from assistant.auth.api_keys import create_api_key
from ingest.pipeline import Ingestor
from tests.api.conftest import API_FILES
from tests.conftest import CORPUS_MODEL, copy_subset, make_settings, open_resources
from tests.conftest_llm_server import free_port
from tests.corpus import HANDBOOK


class LiveServer:
    """Serves `create_app(settings, resources=resources)` on `http://127.0.0.1:PORT` until `stop()`.

    Args:
        settings: the app's settings.
        resources: already-open resources (the caller closes them).
    """

    def __init__(self, settings, resources):
        self.port = free_port()
        self.app = create_app(settings, resources=resources)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"uvicorn-{self.port}", daemon=True)

    @property
    def url(self) -> str:
        """The server's root URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> LiveServer:
        """Start serving and wait until `/healthz` answers.

        Raises:
            RuntimeError: it did not answer within `timeout_s` seconds.
        """
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the app on port {self.port} did not start within {timeout_s} s")

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for its thread."""
        self._server.should_exit = True
        self._thread.join(timeout=30)


RESTRICTED = "departments/tech-ops/process/internal-security/passwords.md"


def serving_settings(data_dir: Path, llm_url: str, **overrides):
    """Settings of an app whose model is the OpenAI-protocol server at `llm_url` (short answers).

    Retrieval runs on `CORPUS_MODEL` (MiniLM), as the session's corpus index does: what the model
    writes (where it stops, what it cites) depends on the sources it is given, and these tests assert
    on it."""
    values = dict(
        embedding_model=CORPUS_MODEL,
        llm_backend="openai", openai_base_url=llm_url, openai_model="assistant", llm_context_tokens=2048,
        llm_max_tokens=64, request_timeout_s=120.0, sse_heartbeat_s=0.05, query_rewrite="rules",
    )
    return make_settings(data_dir, **{**values, **overrides})


@pytest.fixture(scope="module")
def serving(tmp_path_factory, citing_model):
    """The handbook subset with passwords.md readable by group `secops` only, served by uvicorn; its
    model is `citing_model` (an OpenAI-protocol server that copies and cites: these tests assert on
    cited answers, which SmolLM2-135M rarely gives once grounded; the real llama.cpp server is met
    by tests/service/test_backends_answer.py and test_openai_backend.py)."""
    root = tmp_path_factory.mktemp("serving")
    docs = copy_subset(HANDBOOK, root / "docs", API_FILES)
    manifest = root / "acl.yaml"
    manifest.write_text(
        yaml.safe_dump({"default": ["everyone"], "rules": [{"path": RESTRICTED, "allow": ["group:secops"]}]})
    )
    res = open_resources(serving_settings(root / "var", citing_model["openai_base_url"]))
    Ingestor(res).sync(docs, acl=AclManifest.load(manifest))
    server = LiveServer(res.settings, res).start()
    yield server, res, docs, manifest
    server.stop()
    res.close()


def new_key(res, *groups: str) -> tuple[str, dict]:
    """A fresh API key (its principal has `groups`); returns `(principal name, auth headers)`."""
    name = f"svc-{uuid.uuid4().hex[:8]}"
    key = create_api_key(res.db, name, groups=list(groups))
    return name, {"Authorization": f"Bearer {key.key}"}
