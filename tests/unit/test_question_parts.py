"""Splitting a message into the questions it asks (`assistant.answering.parts`), English and Chinese:
what must be split, what must stay whole, and what each part is asked with."""

from __future__ import annotations

import pytest

from assistant.answering.part_answers import renumbered, unsaid_lines
from assistant.answering.parts import MAX_PARTS, split_question

# (message, the parts' texts); one text = the message stays whole.
SPLITS = [
    # Two questions joined by "and"/", and" where what follows opens a question of its own.
    ("How often do I get a new laptop, and how do I order one?", ["How often do I get a new laptop?", "How do I order one?"]),
    ("Which verification methods can I use with Okta, and which one do you recommend?",
     ["Which verification methods can I use with Okta?", "Which one do you recommend?"]),
    ("I got an email that looks like phishing. How do I report it and what happens then?",
     ["How do I report it?", "What happens then?"]),
    ("After how many minutes must my screen lock, and what is the guest Wi-Fi password?",
     ["After how many minutes must my screen lock?", "What is the guest Wi-Fi password?"]),
    # Several question sentences; "And"/"Also," joining them is not part of the question.
    ("Can I buy my previous laptop? What are the steps?", ["Can I buy my previous laptop?", "What are the steps?"]),
    ("How long should my password be? And am I allowed to use autofill?",
     ["How long should my password be?", "Am I allowed to use autofill?"]),
    ("What can I do? Also, how do I book a meeting room?", ["What can I do?", "How do I book a meeting room?"]),
    # Numbered lists.
    ("Two questions: 1. How long must passwords be? 2. When must my screen lock?",
     ["How long must passwords be?", "When must my screen lock?"]),
    ("（1）年假有几天？（2）病假怎么请？", ["年假有几天？", "病假怎么请？"]),
    # Chinese: several question sentences, or 以及/另外/a comma between two questions.
    ("年假有几天？怎么申请？", ["年假有几天？", "怎么申请？"]),
    ("请问年假怎么计算以及如何申请？", ["请问年假怎么计算？", "如何申请？"]),
    ("我什么时候可以休假，需要提前多久申请？", ["我什么时候可以休假？", "需要提前多久申请？"]),
    ("Okta Verify 没有弹出推送怎么办？另外，打印机卡纸怎么处理？", ["Okta Verify 没有弹出推送怎么办？", "打印机卡纸怎么处理？"]),
]

WHOLE = [
    # One question with two verbs: "log in again" asks nothing on its own.
    "How do I reset my password and log in again?",
    "How do I activate my Okta account and set up Okta Verify?",
    # An alternative question is one question.
    "Am I allowed to use the browser's password autofill, or should I use something else?",
    # "what it costs" is an embedded clause (subject before verb), not a second question.
    "How do I know which laptop to order and what it costs?",
    "What is X and Y?",
    # Statements around one question; a title (ticket subject) is context.
    "I start today and got an email from Okta. How do I activate my Okta account?",
    "Who approves access requests\n\nWho has to approve my request for access to a new application?",
    # A subject that the body asks again is one question.
    "Can I buy my old laptop?\n\nAfter my upgrade, can I buy my previous laptop?",
    "The printer on the second floor jams on every double-sided print job.",
    "What is the version 2.5 policy, e.g. for laptops?",
    "Please reset my Okta account. I am locked out.",
    # Chinese: 以及 between two nouns, a condition before a question, a second verb that asks nothing.
    "报销需要发票以及审批单吗？",
    "如果我忘记密码，应该怎么办？",
    "怎么重置密码，然后重新登录？",
    "每月的模型微调是怎么做的？",
    # A clause that frames the question: a condition, a time, a wish, "several" (好几个) is no question word.
    "When my direct report changes role, what systems do I need to tell HR to update?",
    "想判断用户响应慢是不是数据库造成的，应该看哪个性能面板？",
    "集群里有好几个 PD，网页管理界面到底由哪一个提供？",
    "  How   long?? ",
]


@pytest.mark.parametrize("message,texts", SPLITS)
def test_several_questions_are_split_into_their_parts(message, texts):
    assert [p.text for p in split_question(message)] == texts


@pytest.mark.parametrize("message", WHOLE)
def test_a_single_question_stays_whole(message):
    parts = split_question(message)
    assert len(parts) == 1
    assert parts[0].text == parts[0].question == parts[0].query == message.strip()


def test_a_part_that_leans_on_the_one_before_is_searched_with_it_and_asked_alone():
    first, second = split_question("How often do I get a new laptop, and how do I order one?")
    assert first.question == first.query == "How often do I get a new laptop?"
    assert second.query == "How often do I get a new laptop? How do I order one?"
    assert second.question == "How do I order one?"


def test_an_independent_part_is_asked_alone():
    first, second = split_question("How do I report phishing, and how do I install MongoDB Compass on Windows?")
    assert second.question == second.query == "How do I install MongoDB Compass on Windows?"


def test_statements_go_with_the_question_they_lead_to_and_a_title_with_the_first():
    message = "Zoom recording\n\nI cannot record a Zoom meeting. What can I do? Also, how do I book a meeting room?"
    first, second = split_question(message)
    assert first.question == "Zoom recording. I cannot record a Zoom meeting. What can I do?"
    assert second.question == "How do I book a meeting room?"


def test_parts_beyond_the_limit_join_the_last():
    message = " ".join(f"What is rule {n}?" for n in range(1, MAX_PARTS + 3))
    parts = split_question(message)
    assert len(parts) == MAX_PARTS
    assert parts[-1].text == " ".join(f"What is rule {n}?" for n in range(MAX_PARTS, MAX_PARTS + 3))


def test_max_parts_below_one_is_refused():
    with pytest.raises(ValueError, match="max_parts"):
        split_question("What? Why?", max_parts=0)


def test_a_parts_markers_are_renumbered_into_the_composed_answers_sources():
    assert renumbered("A [1, 2]. B [2].", {1: 4, 2: 1}) == "A [4, 1]. B [1]."


def test_lines_said_by_an_earlier_part_are_left_out_and_a_list_keeps_its_numbers():
    seen: set[str] = set()
    first = "To report it:\n\n1. Open the email [1].\n2. Click Report phishing [1]."
    assert unsaid_lines(first, seen) == first
    again = "1. Open the email [3].\n2. Click Report phishing [3].\n3. Security reviews it within a day [3]."
    assert unsaid_lines(again, seen) == "3. Security reviews it within a day [3]."
