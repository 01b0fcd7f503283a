"""Grounded answers through the real answerer over a real index: scripted answers (a real HTTP server
speaking OpenAI's protocol) for each case the grounding must handle, and the real embedded model for a
Chinese question, whose answer must come back in Chinese, cited, with no server path."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from assistant.answering.citations import cited_numbers
from assistant.answering.grounded_stream import LANGUAGE_NOTE
from assistant.answering.language_check import answer_lang_matches
from assistant.answering.prompt import NO_ANSWER
from assistant.composition import Assistant
from assistant.core.principals import ANONYMOUS
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import DOCS_ZH, HANDBOOK
from tests.standin_openai import ScriptedOpenAIServer
from assistant.retrieval import RetrievedChunk

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


def assert_no_server_path(answer, settings) -> None:
    body = str(answer.to_dict())
    assert "file://" not in body and str(settings.data_dir) not in body and str(HANDBOOK) not in body


def test_unknown_markers_and_unsupported_sentences_are_removed_and_only_used_sources_cited(scripted):
    script = (
        "Create a password that is ideally 15 characters or longer [9]. "
        "Use a mix of numbers, letters (upper and lower case), and special characters. "
        "The IT desk resets forgotten passwords every Friday at 4pm in room 12."
    )
    answer, events, settings = scripted_answer(scripted, script)
    assert not answer.abstained
    assert "[9]" not in answer.answer and "Friday" not in answer.answer
    assert "15 characters or longer" in answer.answer and "special characters" in answer.answer
    assert [c.source for c in answer.citations] == [PASSWORDS]  # the one source the answer uses
    assert set(cited_numbers(answer.answer)) == {c.n for c in answer.citations}
    assert_no_server_path(answer, settings)
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) == 2 and "".join(tokens) == events[-1]["answer"] == answer.answer  # a sentence each


def test_an_answer_built_from_nothing_is_declined(scripted):
    script = "The canteen serves lunch from 11:30 to 14:00. Vegetarian dishes cost 6 euros on Fridays."
    answer, events, _ = scripted_answer(scripted, script)
    assert answer.abstained and answer.answer == NO_ANSWER["en"] and answer.citations == []
    assert [e["type"] for e in events] == ["token", "citations", "done"]  # nothing invented was shown


def test_a_looping_model_is_stopped(scripted):
    script = "Create a new password for every system [1]. " * 12
    answer, _, _ = scripted_answer(scripted, script)
    assert answer.answer == "Create a new password for every system [1]." and answer.finish_reason == "stop"


def test_grounding_reaches_the_embedding_model_behind_the_products_query_batcher():
    """The product's retriever embeds questions through a `QueryBatcher` (`composition`), which cannot
    embed passages; grounding must reach the model behind it, which alone attributes a sentence across
    languages. Before, grounding fell back to lexical support in the product, and a Chinese answer about
    English pages was declined whatever it said (every Chinese answer of the `make run` demo)."""
    from assistant.answering.grounded_stream import grounder_for
    from assistant.core.embedder import BUILTIN_E5
    from assistant.retrieval.crosslingual import translate
    from assistant.retrieval.query_batcher import QueryBatcher
    from tests.conftest import shared_embedder

    class Retriever:  # the product's retriever, as `grounder_for` reads it
        embedder = QueryBatcher(shared_embedder(BUILTIN_E5))

    Retriever.translate = staticmethod(translate)
    page = (HANDBOOK / PASSWORDS).read_text(encoding="utf-8")[:1500]
    grounder = grounder_for(Retriever(), [chunk_of(HANDBOOK, PASSWORDS, page, 0)])
    assert source_of(grounder, "密码最好有 15 个或更多字符。") == 1
    assert source_of(grounder, "旧电脑可以免费带回家，无需支付任何费用。") is None


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


def e5_grounder(sources, question: str = ""):
    """The product's grounder for `sources` (answering `question`), with the default embedder (e5 int8)
    and query translation."""
    from assistant.answering.grounded_stream import grounder_for
    from assistant.core.embedder import BUILTIN_E5
    from assistant.retrieval.crosslingual import translate
    from tests.conftest import shared_embedder

    class Retriever:  # what `grounder_for` reads of the product's retriever
        embedder = shared_embedder(BUILTIN_E5)

    Retriever.translate = staticmethod(translate)
    return grounder_for(Retriever(), sources, question)


def chunk_of(root, path: str, text: str, n: int, full_text: str | None = None) -> RetrievedChunk:
    lang = "zh" if root == DOCS_ZH else "en"
    return RetrievedChunk(
        chunk_id=f"p{n}", doc_id=f"p{n}", chunk_index=0, text=text, source=path, uri="", title="", heading="",
        page=None, lang=lang, score=1.0, relevance=0.8, full_text=full_text,
    )


def source_of(grounder, sentence: str) -> int | None:
    from assistant.answering.grounding import split_sentences

    return grounder.judge(split_sentences(sentence)[0]).source


def test_a_chinese_sentence_is_attributed_to_an_english_page_only_when_the_page_holds_its_names():
    """Across languages the check is strictest: the dictionary coverage, the closest page by embedding
    above a higher floor (`MIN_COSINE_ACROSS`), and every Latin-script name of the sentence in the page."""
    pages = [PASSWORDS, "departments/tech-ops/process/internal-security/computer-standards.md"]
    sources = [chunk_of(HANDBOOK, p, (HANDBOOK / p).read_text(encoding="utf-8")[:1500], i) for i, p in enumerate(pages)]
    grounder = e5_grounder(sources)
    assert source_of(grounder, "密码最好有 15 个或更多字符。") == 1
    assert source_of(grounder, "设备必须启用加密。") == 2
    # The same rule with a password manager that the page never names (cosine 0.85 to the page).
    assert source_of(grounder, "密码最好有 15 个或更多字符，并保存在 LastPass 中。") is None
    assert source_of(grounder, "旧电脑可以免费带回家，无需支付任何费用。") is None



def test_a_number_a_chinese_sentence_states_is_checked_as_a_number_not_as_a_name():
    # Fresh-user trial: "停车场9点以后每天收费7欧元。" about "after 9am it costs 7 EUR per day" was removed,
    # because "9" counted as a name that the page must hold as a term (the page's term is "9am").
    page = "# Parking\n\nThe office car park is free for employees before 9am; after 9am it costs 7 EUR per day.\n"
    grounder = e5_grounder([chunk_of(HANDBOOK, "parking.md", page, 0)])
    assert source_of(grounder, "停车场9点以后每天收费7欧元。") == 1
    assert source_of(grounder, "停车场9点以后每天收费12欧元。") is None  # a number the page does not state
    # Re-check trial: without 每天 the dictionary finds 3 of its 7 words in the page (0.43); the numbers
    # the page states lower the floor to 0.4.
    assert source_of(grounder, "停车场9点以后收费7欧元。") == 1
    assert source_of(grounder, "停车场9点以后收费12欧元。") is None


def test_a_chinese_sentence_with_the_pages_number_needs_less_dictionary_coverage():
    # "idle" is not the page's "inactivity", "automatically" not in it: coverage 0.44 (< 0.5), but the
    # number is the page's. The sources in two languages: the sentence's embedding is closer to the
    # Chinese page (e5's same-language offset), and the English page is judged among English sources.
    standards = "departments/tech-ops/process/internal-security/computer-standards.md"
    zh_page = "password-management.md"
    sources = [chunk_of(HANDBOOK, standards, (HANDBOOK / standards).read_text(encoding="utf-8")[:1500], 0),
               chunk_of(DOCS_ZH, zh_page, (DOCS_ZH / zh_page).read_text(encoding="utf-8")[:1500], 1)]
    grounder = e5_grounder(sources)
    assert source_of(grounder, "笔记本电脑闲置10分钟后屏幕要自动锁定。") == 1
    assert source_of(grounder, "笔记本电脑闲置30分钟后屏幕要自动锁定。") is None


def test_a_chinese_sentence_about_a_table_of_english_labels_is_supported_through_the_dictionary():
    # Development capture: "TiDB 中数据库名和表名最长可以有 64 个字符。" against tidb-limitations.md's
    # "| Database | 64 |" under "标识符长度限制" shares 0.19 of its bigrams and was removed.
    text = (DOCS_ZH / "tidb-limitations.md").read_text(encoding="utf-8")
    start = text.index("## 标识符长度限制")
    grounder = e5_grounder([chunk_of(DOCS_ZH, "tidb-limitations.md", text[start : text.index("\n## ", start + 5)], 0)])
    assert source_of(grounder, "TiDB 中数据库名和表名最长可以有 64 个字符。") == 1
    assert source_of(grounder, "TiDB 中数据库名和表名最长可以有 128 个字符。") is None  # not the table's figure


def test_a_sentence_is_judged_among_the_sources_that_share_its_words():
    # Development capture: two chunks of pd-recover.md; the closer one by embedding (0.945) shares 0.43 of
    # "可以使用 PD Recover 工具进行恢复", under the floor for the embedding to decide, and the other one
    # (lexical 0.52, cosine 0.929) was not allowed to support it since it was not the closest.
    text = (DOCS_ZH / "pd-recover.md").read_text(encoding="utf-8")
    title = text.index("# PD Recover")
    method = text.index("## 方式一")
    page = "PD Recover 使用文档"  # the chunks' title, and the heading path of each (as the index stores them)
    sources = [
        replace(chunk_of(DOCS_ZH, "pd-recover.md", text[method : text.index("具体操作步骤如下", method) + 9], 0),
                title=page, heading=f"{page} > 方式一：从存活的 PD 节点重建集群"),
        replace(chunk_of(DOCS_ZH, "pd-recover.md", text[title : text.index("\n", text.index("PD Recover 是", title))], 1),
                title=page, heading=page),
    ]
    grounder = e5_grounder(sources)
    assert source_of(grounder, "PD 集群多数节点故障、无法启动时，可以使用 PD Recover 工具进行恢复。") == 1


def test_a_yes_or_no_in_the_questions_words_must_agree_with_the_page():
    """Fresh-user trial: two answers restated the question with the opposite of the page, cited. Such a
    sentence's only information is its polarity; the page's statement closest to it must agree."""
    from assistant.answering.grounding import ground

    traveling = "departments/tech-ops/process/internal-security/traveling.md"
    page = chunk_of(HANDBOOK, traveling, (HANDBOOK / traveling).read_text(encoding="utf-8"), 0)
    question = "Should I use public WiFi when travelling with my work laptop?"
    wrong = ground("Yes, you should use public WiFi when travelling with your work laptop [1].", e5_grounder([page], question))
    assert wrong.declined and wrong.verdicts[0].contradicts, wrong.text  # the page: "Avoid public WiFi networks"
    right = ground("No, you should not use public WiFi when travelling with your work laptop [1].", e5_grounder([page], question))
    assert not right.declined and right.cited == [1], right.text
    # Across languages, through the dictionary: a planted page says "IT will never ask you for your password."
    it_page = chunk_of(HANDBOOK, "it/accounts.md", (
        "# Account help\n\nIf you cannot sign in, reset your password with Okta's self-service reset link.\n"
        "IT will never ask you for your password.\n"), 0)
    question = "我的账户登录不了，需要把密码发给IT验证吗？"
    wrong = ground("需要把密码发给IT验证[1]。", e5_grounder([it_page], question), lang="zh")
    assert wrong.declined, wrong.text
    right = ground("不需要，IT 不会要求你提供密码[1]。", e5_grounder([it_page], question), lang="zh")
    assert right.declined or right.cited == [1], right.text  # kept when supported; never the opposite


def page_between(root, path: str, start: str, end: str, n: int = 0) -> RetrievedChunk:
    """A source made of `path`'s text from `start` to the end of `end` (a chunk as the index holds it)."""
    text = (root / path).read_text(encoding="utf-8")
    first = text.index(start)
    return chunk_of(root, path, text[first : text.index(end, first) + len(end)], n)


def test_a_yes_in_the_questions_words_needs_a_statement_of_the_page_that_says_it():
    """Fresh-user trials: "Yes, the company gives employees a company car [1]." was kept and cited from the
    travel page's rental-car paragraph, which holds "company", "employee" and "car" in different sentences
    (lexical 0.50, cosine 0.825) and no company car. A yes or no in the question's words is supported
    only by one statement holding half of its terms (`Grounder.says_it`)."""
    from assistant.answering.grounding import ground

    travel = page_between(HANDBOOK, "benefits-pay-perks/benefits-perks/travel/index.md", "- Gas and parking", "- [Zipcar]")
    question = "Does the company give employees a company car?"
    assert ground("Yes, the company gives employees a company car [1].", e5_grounder([travel], question)).declined
    # What the paragraph does say, in the question's words and one more, is kept.
    kept = ground("Yes, the company recommends rental car companies such as Turo and Zipcar to employees [1].",
                  e5_grounder([travel], "Does the company recommend rental car companies to employees?"))
    assert not kept.declined and kept.cited == [1], kept.text


def test_a_number_that_answers_a_how_many_question_is_no_yes_or_no():
    """Fresh-user trial: "背景调查会追溯7年的犯罪记录。" repeats the question's words with a number, and the page's
    sentence is negated ("there will be no inquiry regarding any criminal offense that is more than seven
    (7) years old"): judged as a yes or no opposite to its page, it was declined."""
    from assistant.answering.grounding import ground

    page = page_between(HANDBOOK, "departments/people-talent/background-check-policy.md", "#### Criminal background checks",
                        "in accordance with applicable law.")
    question = "背景调查会追溯多少年的犯罪记录？"
    right = ground("背景调查会追溯7年的犯罪记录。", e5_grounder([page], question), lang="zh")
    assert not right.declined and right.cited == [1], right.text
    assert ground("背景调查会追溯9年的犯罪记录。", e5_grounder([page], question), lang="zh").declined  # not the page's


def test_the_value_a_which_question_asks_for_is_no_yes_or_no():
    """Fresh-user trial, replayed: "The default value of TiDB's `time_zone` variable is `SYSTEM`." adds one word
    to the question's and was removed as the opposite of its (Chinese) page, judged as a yes or no. Only a
    yes/no question has such answers; the yes in the question's words is still checked."""
    from assistant.answering.grounding import ground

    page = page_between(DOCS_ZH, "configure-time-zone.md", "# 时区支持", "作为系统时区。")
    question = "What is the default value of TiDB's time_zone variable?"
    kept = ground("The default value of TiDB's `time_zone` variable is `SYSTEM` [1].", e5_grounder([page], question))
    assert not kept.declined and kept.cited == [1], kept.text


def test_a_chinese_sentence_naming_what_the_page_names_needs_less_dictionary_coverage():
    """Fresh-user trial: "…需要通过 #ask-it-tech-ops 频道提交请求。" was right and removed: the dictionary found 0.47 of
    its words in the page (< 0.5). The channel's name, which the question did not give, is evidence as a
    number is (`MIN_CROSS_LINGUAL_WITH_NUMBERS`)."""
    page = page_between(HANDBOOK, "departments/tech-ops/process/application_access_request.md", "# Application Access Request",
                        "as part of the role.")
    grounder = e5_grounder([page], "入职时没有开通的应用，怎么申请访问权限？")
    assert source_of(grounder, "申请权限的流程是：在入职时没有开通的应用，需要通过 #ask-it-tech-ops 频道提交请求。") == 1
    assert source_of(grounder, "申请权限的流程是：在入职时没有开通的应用，需要通过 #ask-hr-helpdesk 频道提交请求。") is None


def test_a_supported_answer_about_something_else_is_declined():
    # Development capture: "How do I apply for a company car?" (no page answers it) got sentences of the
    # hiring page, supported and cited, sharing no word with the question but "apply" -> "application".
    from assistant.answering.grounding import ground

    page = "departments/people-talent/resources_for_candidates.md"
    text = (HANDBOOK / page).read_text(encoding="utf-8")
    start = text.index("We want to build a diverse")
    sources = [chunk_of(HANDBOOK, page, text[start : text.index("\n", start)], 0)]
    answer = (
        "We carefully consider every application, and will either move forward with you, find another team that "
        "might be a better fit, keep in touch for future opportunities, or thank you for your time [1]."
    )
    off = ground(answer, e5_grounder(sources, "How do I apply for a company car?"))
    assert off.declined and off.supported_share == 1.0, off.text  # supported, and not about the question
    on = ground(answer, e5_grounder(sources, "What happens after I send my job application?"))
    assert not on.declined and on.cited == [1], on.text
    # A bare value answers without repeating the question's words: never judged off the question.
    bare = ground("Every application [1].", e5_grounder(sources, "What do you carefully consider?"))
    assert not bare.declined and bare.cited == [1], bare.text
    # In Chinese: a TiDB page's faithful sentence is no answer to a question about company cars.
    zh_page = "tidb-limitations.md"
    zh_text = (DOCS_ZH / zh_page).read_text(encoding="utf-8")
    zh_start = zh_text.index("## 标识符长度限制")
    zh_sources = [chunk_of(DOCS_ZH, zh_page, zh_text[zh_start : zh_text.index("\n## ", zh_start + 5)], 0)]
    zh_answer = "TiDB 中数据库名和表名最长可以有 64 个字符[1]。"
    off = ground(zh_answer, e5_grounder(zh_sources, "申请公司配车的流程是什么？"), lang="zh")
    assert off.declined and off.supported_share == 1.0, off.text
    on = ground(zh_answer, e5_grounder(zh_sources, "TiDB 的表名最长可以有多少个字符？"), lang="zh")
    assert not on.declined and on.cited == [1], on.text


def test_an_amount_written_in_yuan_takes_the_currency_of_the_english_page():
    # bench_crosslingual_answers: the model wrote the page's "internet ($50)" and "mobile phone ($75)" as
    # 50元 and 75元, and the unit check removed the sentence: a right answer declined, or, kept, the
    # reader told yuan. The amount now takes the page's currency, and the sentence is judged as such.
    from assistant.answering.grounding import ground

    invoices = "benefits-pay-perks/pay-expenses/invoices.md"
    text = (HANDBOOK / invoices).read_text(encoding="utf-8")
    start = text.index("entitled to entire monthly benefit")
    grounder = e5_grounder([chunk_of(HANDBOOK, invoices, text[max(0, start - 600) : start + 400], 0)])
    grounded = ground("公司每月的网络补贴为50元，手机补贴为75元。", grounder, lang="zh")
    assert not grounded.declined and "50美元" in grounded.text and "75美元" in grounded.text, grounded.text
    assert grounded.cited == [1]
    # An amount the page does not state stays in yuan, and is removed as before.
    assert ground("公司每月的网络补贴为60元。", grounder, lang="zh").declined


SQL_FAQ = "faq/sql-faq.md"


def sql_faq_chunk() -> str:
    """A chunk of the TiDB SQL FAQ: the questions from `codec` to `sql_mode` (the limit on statements
    in a transaction among them)."""
    text = (DOCS_ZH / SQL_FAQ).read_text(encoding="utf-8")
    return text[text.index("## TiDB 的 codec") : text.index("## 如何在 TiDB 中修改")]


def test_a_faithful_chinese_paraphrase_is_kept_and_invented_chinese_sentences_are_removed():
    """Chinese sentences against a Chinese page: the page's facts in other words (full-width digits
    included, which Chinese text often uses) are attributed to it; a changed number and statements
    the page does not make are removed."""
    other = (DOCS_ZH / ZH_FILE).read_text(encoding="utf-8")[:1500]
    grounder = e5_grounder([chunk_of(DOCS_ZH, SQL_FAQ, sql_faq_chunk(), 0), chunk_of(DOCS_ZH, ZH_FILE, other, 1)])
    assert source_of(grounder, "一个事务中最多能执行5000条语句。") == 1
    assert source_of(grounder, "一个事务中的语句数量默认最多为５０００条。") == 1
    assert source_of(grounder, "在多台 TiDB 服务器上同时插入数据时，自增 ID 可能不连续。") == 1
    assert source_of(grounder, "一个事务中的语句数量默认最多为８０００条。") is None
    assert source_of(grounder, "超过语句数量限制后，TiDB 会自动把事务拆成多个小事务提交。") is None
    assert source_of(grounder, "事务中的语句越多，执行速度就越快。") is None


def test_an_answer_from_a_focused_passage_is_judged_against_the_whole_chunk():
    """With focused sources (`ASSISTANT_LLM_CPU_SOURCE_TOKENS`) the model sees a few sentences of a chunk;
    grounding counts support on the whole chunk (`RetrievedChunk.full_text`). A faithful paraphrase of
    the passage shares too few terms with the short passage alone (lexical 0.38, under the 0.45 that lets
    the embedding decide) but enough with its chunk (0.50); an invented sentence stays unsupported."""
    from assistant.answering.focus import focus_text, question_terms
    from assistant.retrieval.crosslingual import translate

    chunk = sql_faq_chunk()
    terms = question_terms("一个事务里最多能执行多少条语句？", translate)
    passage = focus_text(chunk, terms, max_tokens=60, count_tokens=len)  # a character is a token here
    assert "默认限制最大为 5000 条" in passage and len(passage) < len(chunk) / 5
    faithful = "默认情况下，一个事务最多只能包含 5000 条语句。"
    focused = e5_grounder([chunk_of(DOCS_ZH, SQL_FAQ, passage, 0, full_text=chunk)])
    assert source_of(focused, faithful) == 1
    assert source_of(focused, "超过语句数量限制后，TiDB 会自动把事务拆成多个小事务提交。") is None
    assert source_of(e5_grounder([chunk_of(DOCS_ZH, SQL_FAQ, passage, 0)]), faithful) is None  # the passage alone
