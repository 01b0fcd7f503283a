"""The shipped default chat model: assembled from its installed part packages into the published file,
and answering grounded questions through the product's answering path, in the question's language.

The other answering tests run on SmolLM2-135M (tests/conftest.py); this one loads the default model
(about 20-60 s on 2 cores: assembly of 0.5-1.1 GB, then two short answers)."""

from __future__ import annotations

import asyncio
import copy
import re
from pathlib import Path

import pytest

from assistant.answering.events import Sources, Status
from assistant.composition import Assistant
from assistant.core.language import cjk_share
from assistant.core.llm.model_files import ModelFileError, assemble, builtin_model, file_digest, part_paths
from assistant.core.principals import ANONYMOUS
from assistant.core.settings import Settings
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import DOCS_ZH, HANDBOOK

DEFAULT = builtin_model(Settings.flat_fields()["llm_model"].default)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gguf")


@pytest.fixture(scope="module")
def assembled(model_dir: Path) -> Path:
    return assemble(DEFAULT, model_dir)


def test_default_model_assembles_into_the_published_file(assembled: Path, model_dir: Path):
    assert assembled.parent == model_dir and assembled.name == DEFAULT.file_name
    assert file_digest(assembled) == (DEFAULT.size_bytes, DEFAULT.sha256)
    with assembled.open("rb") as f:
        assert f.read(4) == b"GGUF"


def test_parts_that_do_not_match_the_published_checksum_are_refused(tmp_path: Path):
    # The real parts with the last one left out: the right start of the file, the wrong size and digest.
    with pytest.raises(ModelFileError, match=f"published {DEFAULT.file_name} is {DEFAULT.size_bytes:,} bytes"):
        assemble(DEFAULT, tmp_path, parts=part_paths(DEFAULT)[:1])
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def assistant(assembled: Path, tmp_path_factory):
    root = tmp_path_factory.mktemp("default-model")
    copy_subset(HANDBOOK, root / "docs" / "handbook", ["departments/tech-ops/process/internal-security/passwords.md"])
    copy_subset(DOCS_ZH, root / "docs" / "zh", ["faq/tidb-faq.md"])
    res = open_resources(make_settings(root / "var", llm_model_path=assembled, llm_max_tokens=240, llm_temperature=0.0))
    Ingestor(res).sync(root / "docs")
    yield Assistant.build(res)
    if res._llm is not None:
        asyncio.run(res.llm.aclose())
    res.close()



def test_answers_a_grounded_english_question_in_english(assistant):
    answer = asyncio.run(assistant.answerer.answer("How long should my passwords be?", principal=ANONYMOUS))
    assert not answer.abstained
    assert re.search(r"\b15\b", answer.answer), answer.answer  # "at least 15 characters" in passwords.md
    assert cjk_share(answer.answer) == 0.0, answer.answer


def test_answers_a_grounded_chinese_question_in_chinese(assistant):
    answer = asyncio.run(assistant.answerer.answer("TiDB 的用户名最长可以有多少个字符？", principal=ANONYMOUS))
    assert not answer.abstained
    assert "32" in answer.answer, answer.answer
    assert cjk_share(answer.answer) > 0.5, answer.answer



def test_sources_in_the_questions_language_are_focused_by_default(assistant):
    # Focused sources are the default on llama_cpp (ASSISTANT_LLM_CPU_SOURCE_TOKENS=100).
    answerer = assistant.answerer
    # The FAQ's answer on XA is a section of about 600 characters: longer than a source's room.
    sources, messages = answerer.prepare("TiDB 为什么不支持 XA 事务？", principal=ANONYMOUS, params=answerer.defaults)
    assert messages is not None and any(s.full_text for s in sources if s.lang == "zh"), [(s.source, s.lang) for s in sources]


@pytest.fixture(scope="module")
def mixed_index(assembled: Path, tmp_path_factory):
    """English handbook pages beside a Chinese page about passwords, with question translation on (the
    product's default; tests/conftest.py turns it off for SmolLM2 and the stand-in servers)."""
    root = tmp_path_factory.mktemp("translation")
    copy_subset(HANDBOOK, root / "docs" / "handbook", [
        "departments/tech-ops/process/internal-security/computer-standards.md",
        "departments/tech-ops/process/internal-security/passwords.md",
    ])
    copy_subset(DOCS_ZH, root / "docs" / "zh", ["password-management.md"])
    # A generous timeout: the test suite's own load must not turn the translation off.
    res = open_resources(make_settings(root / "var", llm_model_path=assembled, llm_max_tokens=240, llm_temperature=0.0,
                                       question_translation=True, question_translation_timeout_s=120.0))
    Ingestor(res).sync(root / "docs")
    yield res
    if res._llm is not None:
        asyncio.run(res.llm.aclose())
    res.close()


class Retrievals:
    """An audit sink that keeps what each retrieval searched for and found (`AuditSink`)."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.chunk_ids: list[list[str]] = []

    def retrieved(self, query, *, principal, chunk_ids, doc_ids=None) -> None:
        self.queries.append(query)
        self.chunk_ids.append(chunk_ids)

    def served_from_cache(self, question, *, principal, chunk_ids, doc_ids=None) -> None:
        pass


def test_a_chinese_question_about_an_english_page_is_searched_with_its_translation(mixed_index):
    # Searched alone, the question ranks the Chinese TiDB password page first (e5 scores Chinese chunks
    # higher); searched with the shipped model's English translation, the page that answers
    # (screens lock after 10 minutes) comes first.
    question = "笔记本电脑闲置多久后屏幕要自动锁定？"
    answerer = Assistant.build(mixed_index).answerer
    alone = answerer.retriever.search(question, principal=ANONYMOUS, top_k=5).chunks
    assert alone[0].source.endswith("password-management.md"), [c.source for c in alone]
    audit = Retrievals()
    asyncio.run(answerer.answer(question, principal=ANONYMOUS, audit=audit))
    searched = audit.queries[0]
    assert searched.startswith(question) and re.search(r"\b(screen|lock)", searched[len(question):], re.I), searched
    first = next(c for c in alone + answerer.retriever.search(question, principal=ANONYMOUS, top_k=20).chunks
                 if c.chunk_id == audit.chunk_ids[0][0])
    assert first.source.endswith("computer-standards.md"), searched
    # Search (POST /api/search, `assistant search`) finds what the answer found.
    found = asyncio.run(answerer.search(question, principal=ANONYMOUS, top_k=5))
    assert found[0].source.endswith("computer-standards.md"), [c.source for c in found]



def test_a_translated_question_shows_the_sources_found_for_it_alone_before_the_translation(mixed_index):
    # Fresh-user trial (issue 42): a Chinese question showed nothing for 8-39 s while its translation
    # waited for the chat model. The sources found for the question alone come first, marked preliminary,
    # then the translation's, which replace them; only then is the prompt read.
    question = "笔记本电脑闲置多久后屏幕要自动锁定？"
    answerer = Assistant.build(mixed_index).answerer
    audit = Retrievals()

    async def run():
        stream = answerer.stream(question, principal=ANONYMOUS, draft=True, audit=audit)
        first = await anext(stream)
        asked_before_first = list(audit.queries)  # nothing translated, nothing audited yet
        rest = [e async for e in stream]
        return first, asked_before_first, rest

    first, asked_before_first, rest = asyncio.run(run())
    assert isinstance(first, Sources) and first.preliminary is True, first
    assert first.sources[0]["source"].endswith("password-management.md"), first.sources
    assert asked_before_first == []
    assert rest[0] == Status("translating", sources=len(first.sources)), rest[:2]
    final = rest[1]
    assert isinstance(final, Sources) and not final.preliminary, final
    assert final.sources[0]["source"].endswith("computer-standards.md"), final.sources
    assert rest[2] == Status("reading", sources=len(final.sources))
    assert len(audit.queries) == 1 and audit.queries[0].startswith(question)  # the final search is audited
    # Without the draft (/v1, CLI, helpdesk) no sources event is sent at all.
    plain = asyncio.run(_events(answerer.stream(question, principal=ANONYMOUS)))
    assert not [e for e in plain if isinstance(e, (Sources, Status))], [e.name for e in plain]


async def _events(stream):
    return [e async for e in stream]


def test_chinese_pages_on_the_same_words_leave_the_second_place_to_an_english_one(mixed_index):
    # Fresh-user trial (3 December): in an index of both languages, 我的密码应该至少多长？ found five chunks
    # of a Chinese database page on passwords, and the handbook page that answers reached no place.
    # Results list distinct documents now: the Chinese page takes one place, in the fused order too.
    question = "我的密码应该至少多长？"
    translation = "How long should my password be at least?"
    retriever = Assistant.build(mixed_index).answerer.retriever
    fused_order = copy.copy(retriever)
    fused_order.other_language_at = 0
    for searcher in (fused_order, retriever):
        chunks = searcher.search(question, principal=ANONYMOUS, translation=translation).chunks
        # A document's near-tie chunks are grouped at its place (`chunk_tie_margin`): documents in order.
        documents = list(dict.fromkeys(c.source for c in chunks))
        assert [c.source for c in chunks] == sorted((c.source for c in chunks), key=documents.index), documents
        assert documents[1].endswith("passwords.md"), [c.source for c in chunks]


def test_an_english_source_of_a_chinese_question_gets_the_room_of_any_source(mixed_index):
    # With the 768-token window of llama_cpp, English sources focused to 1.5x the 100 tokens of a source
    # left room for one: the answering page, when second, never reached the model (5 of 9 declines on
    # bench/bench_crosslingual_answers.py). Focused to 100 tokens around the translation's words, two fit.
    # A question whose words are in most sentences of the page, so that the focused text fills its room.
    question = "公司电脑有哪些标准：密码、加密、锁屏、防火墙？"
    translation = "Which standards apply to company computers: password, encryption, screen lock, firewall?"
    answerer = Assistant.build(mixed_index).answerer
    chunks = answerer.retriever.search(question, principal=ANONYMOUS, top_k=10, translation=translation).chunks
    long_english = [c for c in chunks if c.lang == "en" and answerer.llm.count_tokens(c.text) > 1.6 * answerer.source_tokens]
    assert long_english, [(c.source, answerer.llm.count_tokens(c.text)) for c in chunks]
    shape = answerer._focus(question, translation)
    for chunk in long_english:
        focused = shape(chunk)
        assert focused.full_text and answerer.llm.count_tokens(focused.text) <= answerer.source_tokens, focused.text
