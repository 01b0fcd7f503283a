"""Polarity of source and answer sentences: a list item takes the negation of a short lead-in over it."""

from __future__ import annotations

from assistant.answering.grounding import source_sentences
from assistant.answering.polarity import is_negated
from tests.corpus import DOCS_ZH, HANDBOOK


def polarity_of(root, path: str, start: str) -> bool:
    text = (root / path).read_text(encoding="utf-8")
    sentences = source_sentences(text)
    return next(is_negated(s) for s in sentences if start in s)


def test_items_under_a_do_not_heading_are_negated_and_those_under_do_are_not():
    page = "departments/tech-ops/process/internal-security/passwords.md"
    assert polarity_of(HANDBOOK, page, "Use a password that is the same or similar")
    assert not polarity_of(HANDBOOK, page, "Create a password that is ideally 15 characters")


def test_a_long_lead_in_with_a_negation_in_it_does_not_negate_its_list():
    # "While we are not prescriptive …, we do have some ground rules …:" / "要避免该问题，需注意以下两个要点："
    assert not polarity_of(HANDBOOK, "departments/people-talent/outside-employment.md", "**Primary work:**")
    assert not polarity_of(DOCS_ZH, "faq/upgrade-faq.md", "所以，执行 DDL 操作时，新 column")


def test_cues_in_both_languages_and_words_that_only_look_negative():
    for text in ("Do not share it.", "Never reuse passwords.", "You can't install it.", "请勿升级。", "禁止共享密码。", "没有影响。"):
        assert is_negated(text), text
    for text in ("Acknowledge within no more than 10 minutes.", "两个版本不同。", "这非常重要。", "无论何时都可以。", "未来会支持。"):
        assert not is_negated(text), text


def test_a_list_said_to_be_optional_is_no_prohibition():
    # pull-requests.md: "Suggested but not required:" over "- Also assign the PR to yourself …".
    page = "departments/engineering/dev/process/pull-requests.md"
    assert not polarity_of(HANDBOOK, page, "Also assign the PR to yourself")
    assert [is_negated(s) for s in source_sentences("非必需：\n- 附上截图。\nNot required:\n- Add a video.")][1::2] == [False, False]
