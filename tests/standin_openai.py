"""A tiny real HTTP server that speaks OpenAI's streamed chat completions with a scripted answer and
keeps every request body: for tests that must see what a backend sent, or meet a server that ignores
`stop` (llama_cpp.server and vLLM both honour it).

    with ScriptedOpenAIServer("Twelve characters [1].\\n\\n[2] echo", usage=(90, 7)) as server:
        ...  # OpenAICompatLLM(server.base_url, "assistant"); server.requests[-1]["stop"]
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedOpenAIServer:
    """Serves `POST /v1/chat/completions` (streamed only) on 127.0.0.1, a free port, in a thread.

    Each answer is `answer` streamed one word per chunk (vLLM sends a token per chunk), then a chunk
    with `finish_reason` "stop", then, when the request asks `stream_options.include_usage`, a chunk
    with empty `choices` and `usage`, then `data: [DONE]`. The connection closes after each response.

    Args:
        answer: the text every request gets.
        honour_stop: True: the answer ends before the first of the request's `stop` sequences that
            occurs in it (as vLLM does); False: `stop` is ignored.
        usage: `(prompt_tokens, completion_tokens)` reported in the usage chunk.
        delay_s: seconds to wait before each word (a model that takes its time: streaming and
            stopping can be watched).

    Attributes:
        requests: the JSON bodies received, oldest first.
        closed_early: how many responses the client closed before their end.
    """

    def __init__(
        self, answer: str, *, honour_stop: bool = True, usage: tuple[int, int] = (90, 7), delay_s: float = 0.0
    ):
        self.answer = answer
        self.honour_stop = honour_stop
        self.usage = usage
        self.delay_s = delay_s
        self.requests: list[dict] = []
        self.closed_early = 0
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._http.serve_forever, name="scripted-openai", daemon=True)

    @property
    def base_url(self) -> str:
        """The OpenAI `/v1` URL."""
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()

    def _text_for(self, request: dict) -> str:
        stop = request.get("stop") or []
        stops = [stop] if isinstance(stop, str) else stop
        cuts = [self.answer.find(s) for s in stops if self.honour_stop and s in self.answer]
        return self.answer[: min(cuts)] if cuts else self.answer

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                server.requests.append(request)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {"id": f"cmpl-{len(server.requests)}", "object": "chat.completion.chunk",
                        "model": request.get("model", "assistant")}
                words = server._text_for(request).split(" ")
                try:
                    for i, word in enumerate(words):
                        if server.delay_s:
                            time.sleep(server.delay_s)
                        piece = word if i == 0 else " " + word
                        self._send({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                    self._send({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                    if (request.get("stream_options") or {}).get("include_usage"):
                        prompt, completion = server.usage
                        self._send({**base, "choices": [], "usage": {
                            "prompt_tokens": prompt, "completion_tokens": completion,
                            "total_tokens": prompt + completion}})
                    self.wfile.write(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    server.closed_early += 1  # the client closed the stream early (a stop sequence, a disconnect)
                self.close_connection = True

            def _send(self, chunk: dict) -> None:
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()

            def log_message(self, format: str, *args) -> None:  # quiet: no line per request on stderr
                pass

        return Handler
