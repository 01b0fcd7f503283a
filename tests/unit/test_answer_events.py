"""The answer events' wire format (`assistant.answering.events`, docs/architecture.md "Chat events"):
each event's SSE name and data, keys in the order the web chat has always been sent them."""

import json

from assistant.answering.events import (
    Citations,
    Done,
    DraftSentence,
    Error,
    Replace,
    Revise,
    Sources,
    Status,
    Token,
)
from assistant.core.llm import Usage


def _wire(event) -> str:
    name, data = event.sse()
    return f"{name} {json.dumps(data, ensure_ascii=False)}"


def test_each_event_sends_its_name_and_data():
    entry = {"n": 1, "source": "a.md", "title": "A", "heading": "", "page": None, "route": "/api/documents/d", "doc_id": "d"}
    assert _wire(Sources([entry])) == f'sources {{"sources": [{json.dumps(entry)}]}}'
    assert _wire(Sources([], preliminary=True)) == 'sources {"sources": [], "preliminary": true}'
    assert _wire(Status("reading", sources=3)) == 'status {"stage": "reading", "sources": 3}'
    assert _wire(Status("writing")) == 'status {"stage": "writing"}'
    assert _wire(Status("checking", sentences=2)) == 'status {"stage": "checking", "sentences": 2}'
    assert _wire(Token("密码")) == 'token {"text": "密码"}'
    assert _wire(DraftSentence(0, "Use long passwords. ", "Ne")) == 'sentence {"index": 0, "text": "Use long passwords. ", "rest": "Ne"}'
    assert _wire(Revise(1, " ")) == 'revise {"index": 1, "text": " ", "state": "withdrawn"}'
    assert _wire(Revise(0, "Kept [1]. ")) == 'revise {"index": 0, "text": "Kept [1]. ", "state": "kept"}'
    assert _wire(Replace("")) == 'replace {"text": ""}'
    assert _wire(Citations([{"n": 1}])) == 'citations {"citations": [{"n": 1}]}'
    assert _wire(Error("overloaded", "busy")) == 'error {"code": "overloaded", "message": "busy"}'


def test_done_sends_what_is_set_in_order_and_never_its_citations_or_adapter():
    usage = '"usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}'
    head = f'done {{"answer": "A", "abstained": false, "cached": false, "finish_reason": "stop", {usage}'
    base = dict(abstained=False, cached=False, finish_reason="stop", usage=Usage(5, 2), citations=[{"n": 1}], adapter="hr-v2")
    assert _wire(Done("A", **base)) == head + "}"
    assert _wire(Done("A", **base, grounding={"sentences": 1}, quoted=False)) == head + ', "grounding": {"sentences": 1}, "quoted": false}'
    assert _wire(Done("A", **base, closest=[])) == head + ', "closest": []}'
    assert _wire(Done("A", **base, grounding={}, parts=[{"covered": True}], closest=[{"source": "a.md"}])) == (
        head + ', "grounding": {}, "parts": [{"covered": true}], "closest": [{"source": "a.md"}]}'
    )
