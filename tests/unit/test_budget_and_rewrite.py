"""Token budget (history trimmed oldest first, never over the window) and the deterministic follow-up rule."""

from __future__ import annotations

import pytest

from assistant.answering.budget import fit_history, plan_budget, truncate_to_tokens
from assistant.answering.rewrite import needs_rewrite, rules_rewrite, usable_translation


def words(text: str) -> int:
    return len(text.split())


def turns(n: int, size: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"t{i} " + "w " * size} for i in range(n)]


def test_history_is_trimmed_oldest_first_and_starts_with_a_user_turn():
    history = turns(10, 20)
    kept = fit_history(history, budget_tokens=80, count_tokens=words)
    assert kept == history[-3:][1:] or kept == history[-2:]
    assert kept[0]["role"] == "user" and kept[-1] == history[-1]


@pytest.mark.parametrize("n_turns, size, question_words", [(0, 0, 5), (40, 500, 5), (4, 10, 5000), (100, 2000, 3000)])
def test_the_prompt_always_fits_the_window(n_turns, size, question_words):
    budget = plan_budget(
        "q " * question_words, turns(n_turns, size), context_tokens=2048, max_tokens=300,
        system_prompt="s " * 50, count_tokens=words,
    )
    used = 300 + 50 + 64 + words(budget.question) + sum(words(m["content"]) + 4 for m in budget.history)
    assert used + budget.sources_tokens <= 2048
    assert budget.sources_tokens > 0


def test_truncation_keeps_the_longest_prefix_that_fits():
    assert truncate_to_tokens("a b c d e", 3, words) == "a b c "
    assert truncate_to_tokens("a b", 3, words) == "a b"


@pytest.mark.parametrize(
    "question, rewritten",
    [
        ("And for contractors?", "What is the laptop policy? And for contractors?"),
        ("Does it apply to interns too?", "What is the laptop policy? Does it apply to interns too?"),
        ("How do I request a new monitor for my home office setup from IT?",
         "How do I request a new monitor for my home office setup from IT?"),
        ("那实习生呢？", "What is the laptop policy? 那实习生呢？"),
    ],
)
def test_the_rule_prepends_the_previous_question_to_dependent_follow_ups(question, rewritten):
    history = [{"role": "user", "content": "What is the laptop policy?"}, {"role": "assistant", "content": "..."}]
    assert rules_rewrite(question, history) == rewritten
    assert not needs_rewrite(question, [])


@pytest.mark.parametrize(
    "output, kept",
    [
        ("Do you need to lock your computer when leaving it?", "Do you need to lock your computer when leaving it?"),
        ("Translation: How long should a password be?\n(literal)", "How long should a password be?"),
        ("How long should a call be confirmed after值班?", "How long should a call be confirmed after值班?"),
        ("离开电脑时需要锁屏。", None),  # answered in Chinese: nothing to search with
        ("", None),
        ("Yes", None),
        ("The screen locks after 10 minutes.", None),  # answered, not translated
    ],
)
def test_only_an_english_line_is_taken_as_the_translation(output, kept):
    assert usable_translation(output, "离开电脑时需要锁屏吗？") == kept
