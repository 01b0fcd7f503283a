"""Grounding an answer in its sources, on real corpus pages: markers checked, sentences attributed,
unsupported ones removed, mostly invented answers declined, loops stopped, the language checked."""

from __future__ import annotations

import asyncio

import pytest

from assistant.answering.citations import make_citations
from assistant.answering.grounded_stream import GroundedStream, SentenceBuffer
from assistant.answering.grounding import Grounder, drop_unknown_markers, ground, split_sentences
from assistant.answering.language_check import answer_lang_matches
from assistant.core.language import cjk_share
from assistant.answering.prompt import NO_ANSWER, SYSTEM_PROMPT, build_messages
from assistant.answering.stops import RepetitionGuard
from assistant.retrieval import RetrievedChunk
from tests.corpus import DOCS_ZH, HANDBOOK

SECURITY = "departments/tech-ops/process/internal-security"


def source(root, path: str, doc_id: str) -> RetrievedChunk:
    text = (root / path).read_text(encoding="utf-8")
    return RetrievedChunk(
        chunk_id=f"{doc_id}-0", doc_id=doc_id, chunk_index=0, text=text, source=path,
        uri=f"file://{root / path}", title="", heading="", page=None, lang="en", score=1.0, relevance=0.7,
    )


@pytest.fixture(scope="module")
def sources() -> list[RetrievedChunk]:
    return [
        source(HANDBOOK, f"{SECURITY}/passwords.md", "pw"),
        source(HANDBOOK, f"{SECURITY}/computer-standards.md", "cs"),
        source(DOCS_ZH, "user-account-management.md", "uam"),
    ]


@pytest.fixture(scope="module")
def grounder(sources) -> Grounder:
    return Grounder(sources)  # lexical support only: the embedding path is covered by the service test


def test_sentences_split_in_both_languages_and_markers_after_a_sentence_stay_with_it():
    parts = split_sentences("Use 1Password. [1] Make it 15 characters or longer [1, 2].\n\n1. Open settings.\n设置密码。[3]然后重启！")
    assert [(s.text, s.markers) for s in parts] == [
        ("Use 1Password.", [1]), ("Make it 15 characters or longer.", [1, 2]), ("1. Open settings.", []),
        ("设置密码。", [3]), ("然后重启！", []),
    ]


def test_a_marker_that_names_no_source_is_dropped():
    assert drop_unknown_markers("Passwords [7] need 15 characters [1, 9].", 5) == "Passwords need 15 characters [1]."
    # The prompt's placeholder, copied (fresh-user trial, fifth session: "6. [n]" ended an answer).
    assert drop_unknown_markers("Lock it after 10 minutes [1].\n6. [n]", 2) == "Lock it after 10 minutes [1].\n6."


def test_a_file_name_in_brackets_is_no_citation_and_is_dropped(grounder):
    assert drop_unknown_markers("它们使用 FIDO U2F [1]。[Yubikey-faq.md]", 2) == "它们使用 FIDO U2F [1]。"
    assert drop_unknown_markers("Use 15 characters [source: handbook/passwords.md].", 2) == "Use 15 characters."
    assert drop_unknown_markers("Run `ls [a-z].txt`? See [1] and [the FAQ].", 2) == "Run `ls [a-z].txt`? See [1] and [the FAQ]."
    grounded = ground("Passwords need at least 15 characters [1]. [passwords.md]", grounder)
    assert "passwords.md" not in grounded.text and "[1]" in grounded.text, grounded.text


def test_a_sentence_that_only_points_at_a_source_is_no_fragment(grounder):
    # Fresh-user trial (fourth session): "This is detailed in." was shown after "[Yubikey-faq.md]" was taken off.
    for pointer in ("This is detailed in [Yubikey-faq.md].", "For more details, see [1].", "详见[1]。"):
        grounded = ground(f"Passwords need at least 15 characters [1]. {pointer}", grounder)
        assert not grounded.declined and grounded.text == "Passwords need at least 15 characters [1].", grounded.text
    # A short sentence that ends in a phrasal verb is no pointer.
    kept = ground("Passwords need at least 15 characters [1]. Then log in.", grounder)
    assert kept.text.endswith("Then log in."), kept.text


def test_a_sentence_with_the_marker_in_place_of_its_fact_is_removed(grounder):
    # Development capture: "The minimum TLS version for confidential web traffic over the public internet
    # is [1]." was kept, cited, and stated nothing.
    assert ground("The minimum length of a password is [1].", grounder).declined
    kept = ground("Create a password that is ideally 15 characters or longer [1]. The best password manager is [1].", grounder)
    assert not kept.declined and kept.text == "Create a password that is ideally 15 characters or longer [1].", kept.text
    assert ground("密码的最小长度是[1]。", grounder, lang="zh").declined
    assert not ground("Use a passphrase, which is easier to remember [1].", grounder).declined


def test_supported_sentences_get_their_source_marker_and_unsupported_ones_are_removed(grounder):
    answer = (
        "Create a password that is ideally 15 characters or longer [7]. "
        "Do not use the browser based auto-fill; use the 1Password browser extension instead. "
        "Passwords must be 12 characters max [1]. "
        "Call the helpdesk at 555-1234 every Monday to reset them."
    )
    result = ground(answer, grounder)
    assert not result.declined
    assert result.text == (
        "Create a password that is ideally 15 characters or longer [1]. "
        "Do not use the browser based auto-fill; use the 1Password browser extension instead [1]."
    )
    assert "[7]" not in result.text and "12 characters" not in result.text and "555" not in result.text


def test_an_answer_built_from_nothing_is_declined(grounder):
    invented = "The canteen opens at 11:30 every weekday. Lunch costs 8 euros and vegetarian dishes are served on Fridays."
    result = ground(invented, grounder, lang="en")
    assert result.declined and result.text == NO_ANSWER["en"]


def test_citations_list_only_the_sources_the_answer_uses(grounder, sources):
    answer = "Make passwords hard to guess, even by those who know a lot about you."
    result = ground(answer, grounder)
    citations = make_citations(result.text, sources)
    assert [c.source for c in citations] == [f"{SECURITY}/passwords.md"]
    for c in citations:
        assert "file://" not in str(c.to_dict()) and str(HANDBOOK) not in str(c.to_dict())


def test_a_chinese_sentence_is_attributed_to_the_chinese_source(grounder):
    result = ground("设置 skip-grant-table 之后，只有操作系统的 root 用户才能启动 TiDB 进程。", grounder, lang="zh")
    assert result.text.endswith("[3]。"), result.text


def test_an_echo_of_the_system_prompt_is_removed(grounder):
    echo = SYSTEM_PROMPT.splitlines()[2]  # "1. Use only facts written in the sources. ..."
    result = ground(f"{echo}\nCreate a new password for every system [1].", grounder)
    assert result.text == "Create a new password for every system [1]."


def test_a_copy_of_a_sources_header_line_is_removed(grounder, sources):
    # Fresh-user trial: a question no page answers got the prompt's header of a source, cited.
    header = f"{sources[0].source} — Passwords"
    assert ground(f"{header} [1].", grounder).text == NO_ANSWER["en"]  # nothing left: declined
    result = ground(f"{header} [1]. Create a new password for every system [1].", grounder)
    assert result.text == "Create a new password for every system [1]."
    # Capitalised as the first word of a list item (development capture, "How do I apply for a company car?").
    listed = ground(f"1. {header[0].upper()}{header[1:]}\n2. Create a new password for every system [1].", grounder)
    assert listed.text == "2. Create a new password for every system [1].", listed.text


def test_a_question_in_the_answer_is_removed(grounder):
    # A/B of the translation in the prompt: the model repeated the question and its translation, both
    # made of the page's words; an answer that only asks is declined.
    asked = "How long should my password be [1]? (How long must a password be?) [1]"
    assert ground(asked, grounder).declined
    result = ground("How long should my password be [1]? Create a new password for every system [1].", grounder)
    assert result.text == "Create a new password for every system [1]."


def test_language_check_by_script():
    assert cjk_share("使用 TiDB") == pytest.approx(2 / 3)
    assert answer_lang_matches("新员工入职第一天需要做什么？", "第一天需要领取电脑并设置 1Password。")
    assert not answer_lang_matches("新员工入职第一天需要做什么？", "On the first day you get a laptop.")
    assert not answer_lang_matches("How do I reset the root password?", "在配置文件中添加 skip-grant-table。")


def test_prompt_asks_for_markers_leaves_declines_to_grounding_and_ends_with_the_language_reminder():
    messages = build_messages("新员工入职第一天需要做什么？", [])
    assert messages[0]["content"] == SYSTEM_PROMPT and "[1]" in SYSTEM_PROMPT and NO_ANSWER["en"] not in SYSTEM_PROMPT
    assert messages[-1]["content"].rstrip().endswith("标注资料编号。")


def test_sentence_buffer_holds_a_sentence_until_it_ends_and_keeps_its_trailing_marker():
    buffer = SentenceBuffer()
    assert buffer.push("Use a pass") == []
    assert buffer.push("word manager. [") == []  # a marker may still follow
    (done,) = buffer.push("1] Next")
    assert (done.text, done.markers) == ("Use a password manager.", [1])
    assert [s.text for s in buffer.flush()] == ["Next"]


def test_repetition_guard_trips_on_a_looping_stream():
    guard = RepetitionGuard()
    line = "Your card limit is shown in the finance tool. "
    assert not any(guard.push(w + " ") for w in (line * 2).split())
    assert any(guard.push(w + " ") for w in line.split())


def _scripted(*answers: str):
    """A generator factory that streams each answer in turn, a few characters per delta."""
    queue = list(answers)
    prompts: list[list[dict]] = []

    def generate(messages):
        prompts.append(messages)
        text = queue.pop(0)

        async def deltas():
            for i in range(0, len(text), 7):
                yield text[i : i + 7]

        return deltas()

    return generate, prompts


def _run(stream: GroundedStream, generate) -> list[dict]:
    async def collect():
        return [e async for e in stream.events(generate, [{"role": "user", "content": "q"}])]

    return asyncio.run(collect())


def test_stream_sends_only_grounded_sentences_and_stops_a_loop(grounder):
    loop = "Create a new password for every system. " * 6
    generate, _ = _scripted("Make passwords hard to guess, even by those who know a lot about you. " + loop)
    stream = GroundedStream("How do I choose passwords?", grounder, judge_in_thread=False)
    events = _run(stream, generate)
    assert [e["type"] for e in events] == ["token", "token"]
    assert "".join(e["text"] for e in events) == stream.text
    assert stream.looped and stream.text.count("every system") == 1


def test_stream_retries_once_in_the_question_language(grounder):
    english = "Set skip-grant-table = true in the security section of tidb.toml [3]."
    chinese = "在 tidb.toml 配置文件的 security 部分添加配置项 skip-grant-table [3]。"
    generate, prompts = _scripted(english, chinese)
    stream = GroundedStream("忘记了 TiDB 的 root 密码，怎么重置？", grounder, judge_in_thread=False)
    events = _run(stream, generate)
    assert stream.retried and len(prompts) == 2 and "简体中文" in prompts[1][-1]["content"]
    assert answer_lang_matches("忘记了 TiDB 的 root 密码，怎么重置？", stream.text)
    assert "".join(e["text"] for e in events) == stream.text


def test_stream_declines_with_a_replace_event_when_most_of_the_answer_was_invented(grounder):
    generate, _ = _scripted(
        "Create a new password for every system. "
        "The finance team reviews every password each quarter and rejects passwords shorter than twenty letters. "
        "Employees who forget their passwords three times must attend a security training in the Berlin office."
    )
    stream = GroundedStream("How do I choose passwords?", grounder, judge_in_thread=False)
    events = _run(stream, generate)
    assert [e["type"] for e in events] == ["token", "replace"]
    assert stream.declined and events[-1]["text"] == stream.text == NO_ANSWER["en"]


def test_code_lines_are_checked_but_get_no_marker_and_an_invented_command_is_removed(grounder):
    answer = (
        "在前台执行目录中的 run_tidb.sh 脚本。\n```bash\nmysql -h 127.0.0.1 -P 4000 -u root\n"
        "curl -X POST https://reset.example.com\n```"
    )
    result = ground(answer, grounder, lang="zh")
    assert result.text == "在前台执行目录中的 run_tidb.sh 脚本[3]。\n```bash\nmysql -h 127.0.0.1 -P 4000 -u root\n```"


def test_an_answer_cut_before_its_first_fact_is_kept_and_an_empty_one_declined(grounder):
    cut = ground("Passwords should be", grounder, cut=True)
    assert (cut.text, cut.declined) == ("Passwords should be", False)
    assert ground("", grounder).declined


def test_a_lead_in_is_shown_only_before_a_supported_sentence_and_a_lead_in_alone_is_declined(grounder):
    # Seen on Qwen2.5-Coder-1.5B for a question the sources do not answer: a lead-in repeating the
    # question's words, then nothing.
    alone = ground("你可以通过以下方式将 TiDB 进程的 root 用户密码重置：", grounder, lang="zh")
    assert alone.declined and alone.text == NO_ANSWER["zh"]
    assert not alone.verdicts[0].claim

    followed = ground(
        "To choose a password:\n- Make passwords hard to guess, even by those who know a lot about you.", grounder
    )
    assert followed.text == (
        "To choose a password:\n- Make passwords hard to guess, even by those who know a lot about you [1]."
    )
    invented = ground(
        "Make passwords hard to guess, even by those who know a lot about you.\n"
        "The finance team also checks them:\n- They reject passwords shorter than twenty letters every quarter.",
        grounder,
    )
    assert invented.text == "Make passwords hard to guess, even by those who know a lot about you [1]."


def test_a_held_lead_in_streams_with_the_sentence_that_supports_it(grounder):
    generate, _ = _scripted("To choose a password:\n- Make passwords hard to guess, even by those who know a lot about you.")
    stream = GroundedStream("How do I choose passwords?", grounder, judge_in_thread=False)
    events = _run(stream, generate)
    assert [e["type"] for e in events] == ["token"]
    assert events[0]["text"].startswith("To choose a password:\n- Make") and not stream.declined


def test_a_rule_of_the_pages_do_not_list_restated_as_advice_is_removed_and_restated_faithfully_is_kept(grounder):
    # Qwen2.5-Coder-1.5B, focused sources, "How long should my passwords be, and may I use the browser's
    # password autofill?": every word of the handbook's rule, without the "**Do not:**" above it.
    opposite = ground(
        "Create a password that is ideally 15 characters or longer. "
        "It is recommended to use a password that is the same or similar to one you use on any other websites. "
        "Make passwords hard to guess, even by those who know a lot about you, and use a mix of numbers and letters.",
        grounder,
    )
    assert opposite.text == (
        "Create a password that is ideally 15 characters or longer [1]. "
        "Make passwords hard to guess, even by those who know a lot about you, and use a mix of numbers and letters [1]."
    )
    assert opposite.verdicts[1].contradicts and opposite.verdicts[1].source is None
    for faithful in (
        "Do not use a password that is the same or similar to one you use on any other websites.",
        "Never use a password that is the same or similar to one you use on any other websites.",
        "Do not:\n- Use a password that is the same or similar to one you use on any other websites.",
    ):
        kept = ground(faithful, grounder)
        assert kept.text.endswith("websites [1].") and not kept.declined, (faithful, kept.text)
    # A sentence of the "Do:" list, stated under a negating lead-in of the answer, is the opposite too.
    flipped = ground("Avoid these:\n- Make passwords hard to guess, even by those who know a lot about you.", grounder)
    assert flipped.declined


def test_a_lead_in_of_an_answer_cut_at_its_token_limit_is_sent_as_it_is(grounder):
    generate, _ = _scripted("To choose a password:")
    stream = GroundedStream("How do I choose passwords?", grounder, judge_in_thread=False)

    async def collect():
        return [e async for e in stream.events(generate, [{"role": "user", "content": "q"}], cut=lambda: True)]

    events = asyncio.run(collect())
    assert [e["text"] for e in events] == ["To choose a password:"] and not stream.declined


def test_an_answer_cut_at_its_first_list_number_is_no_echo_of_the_rules(grounder):
    # SmolLM2 at max_tokens=3: "1. [" shares only the "1" of the system prompt's first rule.
    result = ground("1. [", grounder, cut=True)
    assert not result.verdicts[0].echo and not result.declined


def test_a_partial_restatement_of_a_do_not_rule_as_permission_is_removed(grounder):
    # Fresh-user trial, twice: "Yes, you can use the browser's password autofill [1]." (the page lists
    # "Use the browser based auto-fill, …" under "**Do not:**"; "auto-fill" and "autofill" are one term).
    result = ground("Yes, you can use the browser's password autofill.", grounder)
    assert result.declined and result.verdicts[0].contradicts


def test_a_short_answer_is_judged_as_a_claim_cited_when_supported_and_declined_when_not(grounder):
    # Re-check trial: "不可以。" (wrong) and "SG-Staff" (right) came back without a marker or a citation:
    # too short to be a claim, they had passed unchecked.
    supported = ground("A passphrase.", grounder)
    assert supported.text == "A passphrase [1]." and not supported.declined
    assert ground("不可以。", grounder, lang="zh").declined
    assert ground("Bananas.", grounder).declined
    # Development capture: "No." alone, to "Am I allowed to bring my dog to the office?" (no page says),
    # has nothing to cite or check; it was shown as the answer. Cut at the token limit, it is kept as cut.
    assert ground("No.", grounder).declined and ground("Yes!", grounder).declined
    assert not ground("No.", grounder, cut=True).declined
    generate, _ = _scripted("No.")
    stream = GroundedStream("Am I allowed to bring my dog to the office?", grounder, judge_in_thread=False)
    events = _run(stream, generate)
    assert stream.declined and events[-1]["text"] == NO_ANSWER["en"], events


def test_a_short_streamed_answer_is_replaced_by_its_cited_form(grounder):
    generate, _ = _scripted("A passphrase.")
    stream = GroundedStream("What makes a password easy to remember?", grounder, judge_in_thread=False)
    events = _run(stream, generate)
    assert [e["type"] for e in events] == ["token", "replace"] and events[-1]["text"] == stream.text == "A passphrase [1]."


def test_a_bare_list_number_is_no_answer(grounder):
    # Fresh-user trial (third session): the model wrote "1." and stopped; judged as a short answer, the
    # "1" was found in a source and "1 [1]." was sent, cited, and cached.
    result = ground("1.", grounder, lang="zh")
    assert result.declined and result.text == NO_ANSWER["zh"]
    generate, _ = _scripted("1.")
    stream = GroundedStream("申请开通新应用程序账号怎么做？", grounder, judge_in_thread=False)
    events = _run(stream, generate)
    assert stream.declined and events[-1]["text"] == NO_ANSWER["zh"]
    # Streamed before an invented sentence, a bare "1." is never sent (fourth session's trial: "1." went out,
    # then the answer was withdrawn); before a supported one it is sent with it.
    generate, _ = _scripted("1.\nThe finance team reviews every password each quarter and rejects passwords shorter than twenty letters.")
    events = _run(GroundedStream("How do I choose passwords?", grounder, judge_in_thread=False), generate)
    assert [e["type"] for e in events] == ["token"] and events[0]["text"] == NO_ANSWER["en"], events
    generate, _ = _scripted("1.\nCreate a new password for every system.")
    events = _run(GroundedStream("How do I choose passwords?", grounder, judge_in_thread=False), generate)
    assert "".join(e["text"] for e in events if e["type"] == "token").startswith("1.\nCreate a new password"), events
    # A list number before its item stays part of the list.
    listed = ground("1. Create a new password for every system.", grounder)
    assert not listed.declined and "Create a new password for every system" in listed.text


def test_a_code_fence_line_is_no_short_answer(grounder):
    # Fresh-user trial (third session), reproduced: two lead-ins and an empty code block. Judged as a short
    # answer, the fence line "```sql …" was found in a source and released the lead-ins: an answer with
    # no marker and no citation.
    answer = (
        "密码复杂度策略相关的系统变量的配置方式如下：\n\n开启密码复杂度策略检查： 设置密码中至少含有 2 个数字，"
        "至少含有 1 个大写和小写字符，至少含有 1 个特殊字符：\n\n```sql …\n```"
    )
    assert ground(answer, grounder, lang="zh").declined
    generate, _ = _scripted(answer)
    stream = GroundedStream("我的密码应该至少多长？", grounder, judge_in_thread=False)
    _run(stream, generate)
    assert stream.declined and stream.text == NO_ANSWER["zh"]



def test_a_value_with_an_abbreviated_unit_or_a_decimal_point_is_the_pages_value():
    """Fresh-user trial: "2.5 years." answered "And how long for engineering?" from "Engineering and
    Product : 2.5yrs" and was removed: "2." was read as a list number (leaving "5 years") and "2.5yrs" was
    one term."""
    page = source(HANDBOOK, "benefits-pay-perks/benefits-perks/spending-company-money.md", "money")
    grounder = Grounder([page], question="And how long for engineering?")
    for answer in ("2.5 years.", "Engineering laptops are refreshed every 2.5 years."):
        grounded = ground(answer, grounder)
        assert not grounded.declined and grounded.cited == [1], (answer, grounded.text)
    assert ground("3.5 years.", grounder).declined  # not the page's figure


def test_an_answer_of_numbers_alone_is_never_off_the_question():
    """Fresh-user trial: "+1 (650) 273-5591 [1]" answered which phone number a mortgage lender should call,
    was streamed, then withdrawn: its five index terms (1, 650, 273-5591, 273, 5591) shared none with
    the question. Numbers are values, not a topic."""
    page = source(HANDBOOK, "departments/people-talent/people-ops/process/employment_verification.md", "ev")
    question = "What phone number should I give a mortgage lender who wants to verify my employment by phone?"
    grounded = ground("+1 (650) 273-5591 [1]", Grounder([page], question=question))
    assert not grounded.declined and grounded.cited == [1], grounded.text


def test_a_span_of_time_keeps_the_pages_unit():
    """Fresh-user trial: "… refreshed every 3 months [1]." was kept against "Technical Success: 3yrs": every
    word and the number are the page's, the unit is not."""
    page = source(HANDBOOK, "benefits-pay-perks/benefits-perks/spending-company-money.md", "money")
    grounder = Grounder([page], question="How often are laptops refreshed for the Technical Success team?")
    assert ground("The laptops for the Technical Success team are refreshed every 3 months [1].", grounder).declined
    kept = ground("The laptops for the Technical Success team are refreshed every 3 years [1].", grounder)
    assert not kept.declined and kept.cited == [1], kept.text
