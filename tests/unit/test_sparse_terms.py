"""The sparse encoder's terms: jieba segmentation for Chinese, Snowball stemming for English, BM25 weights."""

import pytest

from assistant.core.index import sparse


@pytest.mark.parametrize(
    "text, expected, absent",
    [
        ("忘记了 TiDB 的 root 密码，怎么重置？", {"忘记", "tidb", "root", "密码", "重置"}, {"的", "怎么"}),
        ("发生 OOM 时应该怎么排查", {"oom", "排查"}, {"应该", "怎么"}),
        # search mode also emits the shorter words inside a long one
        ("中华人民共和国", {"中华人民共和国", "中华", "人民", "共和国"}, set()),
    ],
)
def test_chinese_is_segmented_into_words(text, expected, absent):
    terms = set(sparse.terms(text))
    assert expected <= terms, terms
    assert not absent & terms


@pytest.mark.parametrize(
    "word, stem",
    [("passwords", "password"), ("policies", "polici"), ("policy", "polici"), ("running", "run"), ("Encrypted", "encrypt")],
)
def test_english_words_are_lowercased_and_stemmed(word, stem):
    assert sparse.terms(word) == [stem]


def test_english_stop_words_are_dropped_and_identifiers_kept_whole():
    terms = sparse.terms("How do I set skip-grant-table in the config?")
    assert "skip-grant-table" in terms and {"skip", "grant", "tabl"} <= set(terms)
    assert not {"how", "do", "i", "in", "the"} & set(terms)


def test_fullwidth_text_is_normalised():
    assert sparse.terms("ＴｉＤＢ") == sparse.terms("TiDB") == ["tidb"]


def test_query_weights_are_one_per_distinct_term():
    vec = sparse.encode_query("password password reset")
    assert len(vec.indices) == 2 and vec.values == [1.0, 1.0]
    assert vec.indices == sorted(vec.indices)


def test_document_weights_saturate_with_term_frequency():
    once = sparse.encode_document("backup")
    many = sparse.encode_document("backup " * 50)
    assert many.values[0] > once.values[0]
    assert many.values[0] < sparse.K1 + 1  # BM25 saturation bound


def test_term_coverage_counts_query_terms_found_in_a_text():
    terms = set(sparse.terms("如何配置 Redis 的持久化 policies"))
    assert sparse.term_coverage(terms, "Redis 持久化的配置 and the policy") == 1.0
    assert 0 < sparse.term_coverage(terms, "只谈配置") < 0.5
    assert sparse.term_coverage(set(), "anything") == 0.0


def test_closed_compounds_get_their_hyphenated_spellings_by_index_term():
    spellings = sparse.hyphenations("May I use password autofill or e.g. e-mail? 自动填充")
    assert "auto-fill" in spellings[sparse.stem("autofill")]
    assert "a-utofill" in spellings[sparse.stem("autofill")] and "autofil-l" not in spellings[sparse.stem("autofill")]
    # Already hyphenated or dotted words, short words, stop words and Chinese get none.
    assert set(spellings) == {sparse.stem("password"), sparse.stem("autofill")}
    assert sparse.hyphenations("use it") == {}  # short and stop words are skipped
