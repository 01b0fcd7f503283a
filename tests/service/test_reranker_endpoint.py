"""The rerank endpoint client (`EndpointReranker`) against a real HTTP server speaking the rerank API
that vLLM, llama.cpp's server, Jina and Cohere share; the server here scores a document by how many
of the question's words it holds."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import ValidationError

from assistant.core.settings import Settings
from assistant.retrieval.reranker import EndpointReranker
from assistant.retrieval.retriever import RetrievedChunk


class _RerankHandler(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if body["query"] == "broken":
            self.send_response(500)
            self.end_headers()
            return
        words = set(body["query"].lower().split())
        results = [{"index": n, "relevance_score": float(len(words & set(d.lower().split())))}
                   for n, d in enumerate(body["documents"])]
        payload = json.dumps({"results": sorted(results, key=lambda r: -r["relevance_score"])}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):  # keep the test output quiet
        pass


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RerankHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/rerank"
    server.shutdown()


def _chunks(*texts: str) -> list[RetrievedChunk]:
    return [RetrievedChunk(chunk_id=f"c{n}", doc_id=f"d{n}", chunk_index=0, text=t, source=f"{n}.md", uri="",
                           title="", heading="", page=None, lang="en", score=1.0 - n * 0.1, relevance=0.5)
            for n, t in enumerate(texts)]


def test_chunks_come_back_in_the_endpoints_order(endpoint):
    reranker = EndpointReranker(endpoint, model="bge-reranker-v2-m3", api_key="k", max_chunks=3)
    chunks = _chunks("travel booking", "password manager length", "password", "password length manager rules")
    out = reranker.rerank("password length manager", chunks)
    # The first three are reranked by the server's scores; the fourth was not sent and stays last.
    assert [c.chunk_id for c in out] == ["c1", "c2", "c0", "c3"]
    assert [c.score for c in out[:3]] == [3.0, 1.0, 0.0]
    sent = _RerankHandler.requests[-1]
    assert sent["model"] == "bge-reranker-v2-m3" and sent["auth"] == "Bearer k" and sent["top_n"] == 3
    assert sent["documents"][1] == "password manager length"
    reranker.close()


def test_a_failing_endpoint_keeps_the_fused_order(endpoint):
    chunks = _chunks("a b", "b c")
    out = EndpointReranker(endpoint).rerank("broken", chunks)
    assert [c.chunk_id for c in out] == ["c0", "c1"]
    unreachable = EndpointReranker("http://127.0.0.1:9/rerank", timeout_s=0.5)
    assert [c.chunk_id for c in unreachable.rerank("a", _chunks("a", "b"))] == ["c0", "c1"]


def test_two_rerankers_are_refused():
    with pytest.raises(ValidationError, match="choose one reranker"):
        Settings(_env_file=None, reranker_model="/tmp", reranker_url="http://127.0.0.1:8000/rerank")
