"""A tiny real HTTP server that speaks OpenAI's streamed chat completions with a scripted answer and
keeps every request body: for tests that must see what a backend sent, or meet a server that ignores
`stop` (llama_cpp.server and vLLM both honour it).

    with ScriptedOpenAIServer("Twelve characters [1].\\n\\n[2] echo", usage=(90, 7)) as server:
        ...  # OpenAICompatLLM(server.base_url, "assistant"); server.requests[-1]["stop"]
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from assistant.answering.judge import ANSWERS_SYSTEM, JUDGE_INSTRUCTION
from assistant.answering.polarity import is_list_item, is_negating_heading

_SOURCE_HEADER = re.compile(r"^\[(\d+)\] .*$", re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]{3,}|[\u4e00-\u9fff]{2}", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
_JUDGE_PAIR = re.compile(r"^Pair (\d+)\nPassage: (.*)\nStatement: (.*)$", re.MULTILINE)
_ANSWERS = re.compile(r"^Question: (.*)\nPassage: (.*)$", re.MULTILINE)
DECLINE = "I could not find this in the documents you can access."


_STOP = frozenset("the and for are you your how what when where who why can may should does this that with from".split())


def _terms(text: str, stem: int = 5) -> set[str]:
    """English words cut to their first `stem` letters (a crude stem: password/passwords meet; long/longer
    meet only at 4) without stop words, and Chinese character pairs."""
    text = text.lower()
    words = {w[:stem] for w in _WORD.findall(text) if w not in _STOP and not "\u4e00" <= w[0] <= "\u9fff"}
    return words | {text[i : i + 2] for i in range(len(text) - 1) if "\u4e00" <= text[i] <= "\u9fff"}


def judge_reply(request: dict) -> str | None:
    """A stand-in judge's verdicts for the product's evidence-check prompt (`assistant.answering.judge`):
    `i: YES` when at least 60 % of the statement's terms are in its passage, else `i: NO` (and for
    whether a passage answers a question, `EvidenceJudge.answers`, YES when 60 % of the question's
    terms are in it); None when the request is not an evidence check. Deterministic, as `extractive_answer` is for answers."""
    user = next((m["content"] for m in reversed(request.get("messages", [])) if m.get("role") == "user"), "")
    asked = _ANSWERS.search(user)
    if asked and any(m.get("content") == ANSWERS_SYSTEM for m in request.get("messages", [])):
        # "Does the passage answer the question?": YES when 60 % of the question's terms are in it (stems
        # of 4 letters: "How long …?" is answered by "… or longer", as a model reads it).
        said, held = _terms(asked.group(1), stem=4), _terms(asked.group(2), stem=4)
        return "YES" if said and len(said & held) >= 0.6 * len(said) else "NO"
    if JUDGE_INSTRUCTION not in user:
        return None
    lines = []
    for m in _JUDGE_PAIR.finditer(user):
        said, held = _terms(m.group(3)), _terms(m.group(2))
        lines.append(f"{m.group(1)}: {'YES' if said and len(said & held) >= 0.6 * len(said) else 'NO'}")
    return "\n".join(lines)


def extractive_answer(request: dict) -> str:
    """What a model that copies and cites would answer to a chat request in the product's prompt format
    (`Sources:` blocks `[n] path` then text, then `Question: ...`): the two sentences of the sources
    that share the most words (or Chinese character pairs) with the question, each with its source's
    `[n]` (sentences of 12 characters to 30 words); the product's decline sentence when no sentence
    shares any. An item of a list under a negating lead-in ("**Do not:**") is copied with it ("Do not:
    Use the browser based auto-fill …"), as a faithful model would. Deterministic, so that tests of
    the answering mechanics (streaming, citations, caching, ACLs) do not depend on a small model's luck.
    """
    user = next((m["content"] for m in reversed(request.get("messages", [])) if m.get("role") == "user"), "")
    body, _, question = user.rpartition("Question:")
    question = question.strip().splitlines()[0] if question.strip() else ""
    wanted = _terms(question)
    headers = list(_SOURCE_HEADER.finditer(body))
    scored = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(body)
        negation = ""  # a careful copier keeps a "Do not:" list's lead-in with the item it copies
        for raw in body[header.end() : end].splitlines():
            if not raw.strip():
                continue
            if is_list_item(raw.strip()):
                prefix = negation
            else:
                negation = raw.strip().strip("*_ ") + " " if is_negating_heading(raw) else ""
                prefix = ""
            line = raw.strip().lstrip("-*#> ").strip()
            for sentence in _SENTENCE_END.split(line):
                if len(sentence) >= 12 and len(sentence.split()) <= 30:
                    scored.append((len(wanted & _terms(sentence)), -len(scored), prefix + sentence.strip(), header.group(1)))
    best = sorted((s for s in scored if s[0] > 0), reverse=True)[:2]
    if not best:
        return DECLINE
    return " ".join(
        f"{text.rstrip('.。')}[{n}]。" if "\u4e00" <= text[-2:-1] <= "\u9fff" else f"{text.rstrip('.')} [{n}]."
        for _, _, text, n in best
    )


class ScriptedOpenAIServer:
    """Serves `POST /v1/chat/completions` (streamed only) on 127.0.0.1, a free port, in a thread.

    Each answer is `answer` (a string, or a function of the request's JSON body such as
    `extractive_answer`) streamed one word per chunk (vLLM sends a token per chunk; a word counts as a
    token here), at most the request's `max_tokens` of them, then a chunk with `finish_reason` "stop"
    ("length" when `max_tokens` cut it), then, when the request asks `stream_options.include_usage`, a chunk
    with empty `choices` and `usage`, then `data: [DONE]`. The connection closes after each response.

    Args:
        answer: the text every request gets, or a function from the request body to the text.
        honour_stop: True: the answer ends before the first of the request's `stop` sequences that
            occurs in it (as vLLM does); False: `stop` is ignored.
        usage: `(prompt_tokens, completion_tokens)` reported in the usage chunk; None: counted (the
            prompt's words, the words sent).
        delay_s: seconds to wait before each word (a model that takes its time: streaming and
            stopping can be watched).
        judge: True: an evidence-check request gets `judge_reply`'s verdicts, not `answer`; False:
            it gets `answer` like any request.

    Attributes:
        requests: the JSON bodies received, oldest first.
        closed_early: how many responses the client closed before their end.
    """

    def __init__(
        self,
        answer: str | Callable[[dict], str],
        *,
        honour_stop: bool = True,
        usage: tuple[int, int] | None = (90, 7),
        delay_s: float = 0.0,
        judge: bool = True,
    ):
        self.answer = answer
        self.judge = judge
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
        verdicts = judge_reply(request) if self.judge else None
        if verdicts is not None:
            return verdicts
        answer = self.answer(request) if callable(self.answer) else self.answer
        stop = request.get("stop") or []
        stops = [stop] if isinstance(stop, str) else stop
        cuts = [answer.find(s) for s in stops if self.honour_stop and s in answer]
        return answer[: min(cuts)] if cuts else answer

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
                limit = request.get("max_tokens") or request.get("max_completion_tokens")
                finish = "length" if limit and len(words) > limit else "stop"
                words = words[:limit] if limit else words
                try:
                    for i, word in enumerate(words):
                        if server.delay_s:
                            time.sleep(server.delay_s)
                        piece = word if i == 0 else " " + word
                        self._send({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                    self._send({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                    if (request.get("stream_options") or {}).get("include_usage"):
                        prompt, completion = server.usage or (
                            sum(len(str(m.get("content", "")).split()) for m in request.get("messages", [])), len(words))
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
