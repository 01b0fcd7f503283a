"""Dictionary query translation (CC-CEDICT): what the keyword query gains in the other language."""

from __future__ import annotations

from assistant.core.index import sparse
from assistant.retrieval.crosslingual import says_nothing_of_the_topic, translate


def _translations(question: str) -> set[str]:
    return {t for g in translate(question).groups for t in g.translations}


def test_a_chinese_question_gains_english_keywords():
    terms = _translations("忘记了 TiDB 的 root 密码，怎么重置？")
    assert {"password", "reset"} <= terms  # stemmed as the English index terms are
    groups = translate("忘记了 TiDB 的 root 密码，怎么重置？").groups
    assert any(g.source == ("tidb",) and not g.translations for g in groups)  # product names stay


def test_an_english_question_gains_chinese_keywords():
    terms = _translations("How do I stop TiDB logs from printing sensitive user data?")
    assert {"日志", "敏感", "用户"} <= terms and terms & {"数据", "资料"}
    # A phrase of stop words ("how can" is 怎能 in the dictionary) says nothing about the topic.
    assert "怎能" not in _translations("How can I reset it?")


def test_each_word_shares_one_unit_of_weight_and_own_terms_keep_theirs():
    translation = translate("How do I reset my password?")
    weights = translation.weights()
    for group in translation.groups:
        if group.translations:
            assert sum(weights[t] for t in set(group.translations)) <= 1.0 + 1e-9
    vector = sparse.encode_query("reset password", extra={**weights, "password": 0.1})
    by_index = dict(zip(vector.indices, vector.values))
    assert by_index[sparse.term_vector("password").indices[0]] == 1.0  # the question's own term wins
    assert by_index[sparse.term_vector("密码").indices[0]] < 1.0


def test_coverage_counts_a_word_found_in_either_language():
    translation = translate("How do I reset the root password?")
    chinese_page = "忘记 root 密码时，可以在配置文件中加入 skip-grant-table 后重置密码。"
    english_page = "The cafeteria opens at noon."
    assert translation.coverage(chinese_page) >= 2 / 3  # root, 密码 (password), 重置 (reset)
    assert translation.coverage(english_page) == 0.0
    assert not translate("TiDB 3.0")  # nothing to translate is falsy


def test_question_words_and_cuts_across_word_boundaries_are_no_subject():
    # jieba cuts 带薪育儿假有几周 into 带薪/育儿/假有/几周 and 入职时 into 入/职时: neither 假有, 几周 nor 职时 is a word.
    for term in ("多少", "多长", "假有", "几周", "职时"):
        assert says_nothing_of_the_topic(term), term
    # Words (in the dictionary, or without a function character) and names stay the question's subject.
    for term in ("食堂", "停车位", "配车", "育儿", "tidb", "mongodb"):
        assert not says_nothing_of_the_topic(term), term


def test_the_dictionary_is_read_from_its_file_in_the_model_cache_not_held_in_memory():
    # Issue 38: the tables as Python objects took ~140 MB of every process and 3-6 s of CPU at each start.
    import sqlite3

    from assistant.core.settings import get_settings
    from assistant.retrieval.crosslingual import MAX_SENSES, dictionary, dictionary_file

    d = dictionary()
    assert d.path == dictionary_file(get_settings().model_cache_path) and d.path.is_file()
    assert not any(isinstance(v, dict) and len(v) > 1000 for v in vars(d).values())  # no table in memory
    with sqlite3.connect(d.path) as db:
        entries = db.execute("SELECT count(*) FROM zh_en").fetchone()[0]
    assert entries > 100_000  # CC-CEDICT's simplified words
    assert "password" in d.english_senses("密码") and len(d.english_senses("打")) == MAX_SENSES
    assert d.chinese_words("password")[0] == "密码" and d.english_senses("不是一个词") == []
