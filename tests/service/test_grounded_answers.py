"""Grounded answers through the real answerer over a real index: scripted answers (a real HTTP server
speaking OpenAI's protocol) for each case the grounding must handle, the evidence judge with the shipped
chat model (Qwen2.5-Coder-1.5B) on paraphrases and contradictions in both languages, and the real
embedded model for a Chinese question, whose answer must come back in Chinese, cited, with no server path."""

from __future__ import annotations

import asyncio
import re

import pytest

from assistant.answering.citations import cited_numbers
from assistant.answering.events import DraftSentence, Revise, Status, Token
from assistant.answering.grounded_stream import LANGUAGE_NOTE
from assistant.answering.grounding import Grounder, aground, ground, source_sentences, split_sentences, supported_share
from assistant.answering.judge import EvidenceJudge, Pair
from assistant.answering.language_check import answer_lang_matches
from assistant.answering.prompt import NO_ANSWER
from assistant.composition import Assistant
from assistant.core.principals import ANONYMOUS
from assistant.retrieval import RetrievedChunk
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import DOCS_ZH, HANDBOOK
from tests.standin_openai import ScriptedOpenAIServer

PASSWORDS = "departments/tech-ops/process/internal-security/passwords.md"
FILES = [PASSWORDS, "departments/tech-ops/process/application_access_request.md"]
ZH_FILE = "user-account-management.md"
QUESTION = "How long should my passwords be?"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("grounded") / "docs"
    copy_subset(HANDBOOK, root, FILES)
    copy_subset(DOCS_ZH, root, [ZH_FILE])
    return root


@pytest.fixture(scope="module")
def scripted(folder, tmp_path_factory):
    """The real answerer over `folder`, whose model (a real HTTP server) writes `server.answer`."""
    with ScriptedOpenAIServer("") as server:
        settings = make_settings(
            tmp_path_factory.mktemp("scripted") / "var", llm_backend="openai", llm_context_tokens=4096,
            openai_base_url=server.base_url, openai_model="assistant", answer_cache_entries=0,
        )
        res = open_resources(settings)
        try:
            Ingestor(res).sync(folder)
            yield server, Assistant.build(res).answerer, settings
        finally:
            asyncio.run(res.llm.aclose())
            res.close()


def scripted_answer(scripted, script: str, question: str = QUESTION):
    """`question` answered by the real answerer whose model writes `script`; also the stream's events."""
    server, answerer, settings = scripted
    server.answer = script

    async def run():
        events = [e async for e in answerer.stream(question, principal=ANONYMOUS)]
        return await answerer.answer(question, principal=ANONYMOUS), events

    answer, events = asyncio.run(run())
    return answer, events, settings


def copying(template: str):
    """A scripted model that copies from its prompt: `template` with `{a}` and `{b}` the first two
    sentences of the passwords page's source (`grounding.source_sentences`: with their list's "Do not:"), `{n}`
    that source's number; "" for a prompt without that source (the judge's). Retrieval picks which
    chunk of the page the prompt holds, so the sentences are read from the prompt."""

    def answer(request: dict) -> str:
        user = request["messages"][-1]["content"]
        m = re.search(rf"^\[(\d+)\] {re.escape(PASSWORDS)}[^\n]*\n(.*?)(?=\n\n\[\d+\] |\n\nQuestion:)", user, re.S | re.M)
        if not m:
            return ""
        lines = [x.strip("-*# ") for x in source_sentences(m.group(2)) if x.count(" ") >= 5]
        return template.format(n=m.group(1), a=lines[0].rstrip(".") + ".", b=lines[1].rstrip(".") + ".")

    return answer


def assert_no_server_path(answer, settings) -> None:
    body = str(answer.to_dict())
    assert "file://" not in body and str(settings.storage.data_dir) not in body and str(HANDBOOK) not in body


def test_unknown_markers_and_unsupported_sentences_are_removed_and_only_used_sources_cited(scripted):
    script = copying("{a} [9] {b} The IT desk resets forgotten passwords every Friday at 4pm in room 12.")
    answer, events, settings = scripted_answer(scripted, script)
    assert not answer.abstained, answer
    assert "[9]" not in answer.answer and "Friday" not in answer.answer
    assert answer.answer.count("[") == 2 and answer.grounding["copies"] == 2, answer
    assert [c.source for c in answer.citations] == [PASSWORDS]  # the one source the answer uses
    assert set(cited_numbers(answer.answer)) == {c.n for c in answer.citations}
    assert_no_server_path(answer, settings)
    tokens = [e.text for e in events if isinstance(e, Token)]
    assert tokens == [events[-1].answer] == [answer.answer]  # only the checked answer, once


def test_an_answer_built_from_nothing_is_declined(scripted):
    script = "The canteen serves lunch from 11:30 to 14:00. Vegetarian dishes cost 6 euros on Fridays."
    answer, events, _ = scripted_answer(scripted, script)
    assert answer.abstained and answer.answer == NO_ANSWER["en"] and answer.citations == []
    assert [e.name for e in events] == ["token", "citations", "done"]  # nothing invented was shown
    assert [d["source"] for d in events[-1].closest] and all(d["route"].startswith("/api/documents/") for d in events[-1].closest)


def test_the_draft_comes_after_the_sources_and_a_withdrawn_sentence_is_named(scripted):
    script = copying("{a} [{n}] The IT desk resets forgotten passwords every Friday at 4pm in room 12. {b}")
    server, answerer, _ = scripted
    server.answer = script

    async def run():
        return [e async for e in answerer.stream(QUESTION, principal=ANONYMOUS, draft=True)]

    events = asyncio.run(run())
    kinds = [e.name for e in events]
    assert kinds[:2] == ["sources", "status"] and events[1] == Status("reading", sources=len(events[0].sources))
    assert PASSWORDS in [s["source"] for s in events[0].sources] and all("text" not in s for s in events[0].sources)
    assert kinds.index("token") < kinds.index("sentence") < kinds.index("revise") < kinds.index("citations")
    drafted = "".join(e.text for e in events if isinstance(e, Token))  # the draft as written
    assert "Friday" in drafted and drafted.endswith(".") and len([e for e in events if isinstance(e, DraftSentence)]) == 3
    revised = [e for e in events if isinstance(e, Revise)]
    assert [e.state for e in revised] == ["kept", "withdrawn", "kept"] and revised[1].text == ""
    assert "".join(e.text for e in revised).strip() == events[-1].answer
    assert "Friday" not in events[-1].answer and events[-1].grounding["removed"] == 1
    assert "Friday" not in str(events[-1].to_dict())  # a withdrawn sentence is counted, never sent again


def test_a_looping_model_is_stopped(scripted):
    script = copying("{b} " * 12)
    answer, _, _ = scripted_answer(scripted, script)
    assert answer.answer.count("[") == 1 and answer.finish_reason == "stop", answer


@pytest.mark.slow
def test_the_embedded_model_answers_a_chinese_question_in_chinese_with_valid_citations(folder, tmp_path):
    question = "忘记了 TiDB 的 root 密码，怎么重置？"
    res = open_resources(make_settings(tmp_path / "var", llm_context_tokens=4096))
    try:
        Ingestor(res).sync(folder)
        answer = asyncio.run(Assistant.build(res).answerer.answer(question, principal=ANONYMOUS))
        settings = res.settings
    finally:
        asyncio.run(res.llm.aclose()) if res._llm is not None else None
        res.close()
    text = answer.answer
    # In Chinese, or (the model wrote English twice) with the note that says so.
    assert answer_lang_matches(question, text) or text.startswith(LANGUAGE_NOTE["zh"]), text
    numbers = {c.n for c in answer.citations}
    assert set(cited_numbers(text)) == numbers, answer.to_dict()  # every marker names a listed source
    if not answer.abstained:
        assert answer.citations, answer.to_dict()
    assert_no_server_path(answer, settings)


def chunk_of(root, path: str, text: str, n: int, full_text: str | None = None) -> RetrievedChunk:
    lang = "zh" if root == DOCS_ZH else "en"
    return RetrievedChunk(
        chunk_id=f"p{n}", doc_id=f"p{n}", chunk_index=0, text=text, source=path, uri="", title="", heading="",
        page=None, lang=lang, score=1.0, relevance=0.8, full_text=full_text,
    )


def test_a_supported_answer_about_something_else_is_answered_from_the_page_or_declined():
    # Development capture: "How do I apply for a company car?" (no page answers it) got sentences of the
    # hiring page, supported and cited, sharing no word with the question but "apply" -> "application".
    page = "departments/people-talent/resources_for_candidates.md"
    text = (HANDBOOK / page).read_text(encoding="utf-8")
    start = text.index("We want to build a diverse")
    sources = [chunk_of(HANDBOOK, page, text[start : text.index("\n", start)], 0)]
    answer = (
        "We carefully consider every application, and will either move forward with you, find another team that "
        "might be a better fit, keep in touch for future opportunities, or thank you for your time [1]."
    )
    off = ground(answer, Grounder(sources, question="How do I apply for a company car?"))
    assert off.declined and supported_share(off.verdicts) == 1.0, off.text  # supported, and not about the question
    on = ground(answer, Grounder(sources, question="What happens after I send my job application?"))
    assert not on.declined and on.cited == [1], on.text
    bare = ground("Every application [1].", Grounder(sources, question="What do you carefully consider?"))
    assert not bare.declined and bare.cited == [1], bare.text  # a bare value: never off the question


SQL_FAQ = "faq/sql-faq.md"


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    """The evidence judge with the shipped chat model (Qwen2.5-Coder-1.5B Q4_K_M, llama.cpp, 2 threads)."""
    from assistant.core.llm.llama_cpp import LlamaCppLLM
    from assistant.core.llm.model_files import configured_gguf_path

    settings = make_settings(tmp_path_factory.mktemp("judge") / "var", llm_model="qwen2.5-1.5b")
    llm = LlamaCppLLM(configured_gguf_path(settings), context_tokens=4096, threads=2)
    yield EvidenceJudge(llm)
    asyncio.run(llm.aclose())


def test_the_judge_keeps_paraphrases_and_removes_contradictions_and_inventions_in_both_languages(judge):
    """One judge call for seven sentences that are no near-copies of their pages: the model must say YES
    to the paraphrases and NO to the contradicted or invented ones (with the batched prompt and 240-
    character windows the 1.5B model got all seven right; with 480-character windows it said YES to two
    of the wrong ones, docs/notes/answer-grounding-investigations.md)."""
    sql = (DOCS_ZH / SQL_FAQ).read_text(encoding="utf-8")
    sql = sql[sql.index("## TiDB 的 codec") : sql.index("## 如何在 TiDB 中修改")]
    passwords = (HANDBOOK / PASSWORDS).read_text(encoding="utf-8")
    grounder = Grounder([chunk_of(HANDBOOK, PASSWORDS, passwords, 0), chunk_of(DOCS_ZH, SQL_FAQ, sql, 1)], judge=judge)
    cases = {
        "默认情况下，一个事务最多只能包含 5000 条语句。": 2,
        "超过语句数量限制后，TiDB 会自动把事务拆成多个小事务提交。": None,
        "事务中的语句越多，执行速度就越快。": None,
        "You should not let the browser fill in your passwords automatically.": 1,
        "You can let the browser autofill your passwords.": None,  # the page: "Do not: Use the browser based auto-fill"
        "Passwords should be long, ideally 15 characters or more.": 1,
        "Passwords must be changed every month.": None,
    }
    sentences = [s for text in cases for s in split_sentences(text)]
    verdicts = grounder.prejudge(sentences)
    # None is a near-copy; one invention shares too few words with its window to be asked about.
    assert [v.by for v in verdicts] == ["", "overlap", "", "", "", "", ""], verdicts
    # The judge on all seven sentences and their windows, in one call (a batch of six, without the
    # "overlap" one, got "Passwords must be changed every month" wrong: batched verdicts vary,
    # docs/notes/answer-grounding-investigations.md).
    said = asyncio.run(judge.judge([Pair(v.sentence.text, v.passage) for v in verdicts]))
    assert {v.sentence.text: (v.candidate if yes else None) for v, yes in zip(verdicts, said)} == cases


def test_an_answer_the_judge_rejects_is_quoted_from_the_page_when_it_holds_the_question(judge):
    passwords = (HANDBOOK / PASSWORDS).read_text(encoding="utf-8")
    sources = [chunk_of(HANDBOOK, PASSWORDS, passwords, 0)]
    grounder = Grounder(sources, judge=judge, question="How many characters should a password have?")
    grounded = asyncio.run(aground("You can let the browser autofill your passwords, which need 8 characters.", grounder))
    assert grounded.quoted and "15 characters" in grounded.text and grounded.text.endswith("[1]"), grounded.text


def test_a_claim_with_a_wrong_value_is_answered_with_the_sentence_it_restates(judge):
    # README's example question (fresh-user trial, issue 42): the model wrote "at least 12 characters" for
    # "ideally 15 characters or longer"; the number rule rightly removed it, and the windows holding most of
    # the question's words ("password": the shortest, a "Do not" item and Okta's "How do I reset my
    # password?") answered nothing, so the reader got "not found" with passwords.md ranked first. The
    # sentence the rejected claim restates is the one the judge is asked about first.
    okta = "departments/tech-ops/tools/Okta/main.md"
    sources = [
        chunk_of(HANDBOOK, PASSWORDS, (HANDBOOK / PASSWORDS).read_text(encoding="utf-8"), 0),
        chunk_of(HANDBOOK, okta, (HANDBOOK / okta).read_text(encoding="utf-8"), 1),
    ]
    grounder = Grounder(sources, judge=judge, question="How long should my password be?")
    grounded = asyncio.run(aground("The password should be at least 12 characters long. [1]", grounder))
    assert grounded.quoted and not grounded.declined, grounded.text
    assert "ideally 15 characters or longer [1]" in grounded.text and "12" not in grounded.text, grounded.text


def test_an_answer_nothing_supports_is_quoted_from_the_passage_the_judge_says_answers_the_question(judge):
    # Development capture en-13: the model wrote only the sources' header lines; the name-change page,
    # retrieved second, answers the question in other words than it asks ("married" / "marriage
    # certificate": 2 of its 9 terms, too few for the quote without a judge). The judge is asked about the
    # best window of each source: the feedback survey does not answer, the name-change page does.
    feedback = "departments/engineering/demo-day.md"
    names = "departments/people-talent/people-ops/process/name-changes.md"
    sources = [
        chunk_of(HANDBOOK, feedback, "## Got feedback?\n\nTell us what you're loving and what we can improve on in this feedback survey.", 0),
        chunk_of(HANDBOOK, names, (
            "### Step 1 Notify People Ops\n\n- Notify people-ops@sourcegraph.com as soon as possible with your name change request.\n"
            "- If a legal change, include legal documentation such as a court order, marriage certificate, etc. to show proof of the name change."
        ), 1),
    ]
    question = "I got married and took my spouse's surname: who must I tell and what proof do they want?"
    answer = f"{question} [1] {feedback} — Demo day > Got feedback?"
    grounded = asyncio.run(aground(answer, Grounder(sources, judge=judge, question=question)))
    assert grounded.quoted and "marriage certificate" in grounded.text and grounded.text.endswith("[2]"), grounded.text
    unanswered = "What proof of address do I need for the company parking permit?"
    declined = asyncio.run(aground("Bring a utility bill [2].", Grounder(sources, judge=judge, question=unanswered)))
    assert declined.declined and not declined.quoted, declined.text
