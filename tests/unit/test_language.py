"""The one language detector: what counts as a CJK ideograph, and how questions and documents are judged."""

from assistant.core.index import sparse
from assistant.core.language import (
    CJK_RUN,
    count_cjk,
    document_language,
    has_cjk,
    is_cjk,
    question_language,
)


def test_the_ideograph_blocks_and_only_they_count():
    # First and last of Extension A, the Unified block and the Compatibility block.
    for ch in "\u3400\u4dbf\u4e00\u9fff\uf900\ufaff数据":
        assert is_cjk(ch) and has_cjk(ch) and count_cjk(ch) == 1, hex(ord(ch))
    # Hexagram symbols between Extension A and the Unified block, kana, Hangul, CJK and full-width
    # punctuation, Latin letters: not ideographs.
    for ch in "\u4dc0\u4dff\u3002\uff1fカな한a\u00e9":
        assert not is_cjk(ch) and not has_cjk(ch) and count_cjk(ch) == 0, hex(ord(ch))
    assert count_cjk("TiDB 的日志 log") == 3
    assert [m.group() for m in CJK_RUN.finditer("TiDB 的日志 log 里")] == ["的日志", "里"]


def test_a_question_with_one_chinese_word_is_chinese():
    assert question_language("How do I reset my password?") == "en"
    assert question_language("怎样防止 TiDB 日志里泄露用户数据？") == "zh"
    assert question_language("What does 数据 mean in the TiDB docs?") == "zh"
    assert question_language("") == "en"


def test_a_document_is_chinese_from_a_fifth_of_its_letters():
    assert document_language("TiDB 是一个分布式数据库，支持水平扩展。") == "zh"
    assert document_language("An English page that names 张三 once among many other words here.") == "en"
    # 2 ideographs among 10 letters is exactly the share; 2 among 11 is below it.
    assert document_language("abcdefgh数据") == "zh"
    assert document_language("abcdefghi数据") == "en"
    # Only the sample at the start is read.
    assert document_language("a" * 4000 + "数据" * 1000) == "en"
    assert document_language("") == "en"


def test_the_sparse_tokenizer_cuts_at_the_same_runs():
    # Chinese runs go to jieba, the text around them to the Latin analyser: without the cut,
    # "password数据" would be one word (both are word characters).
    terms = sparse.terms("password数据 rotation")
    assert "password" in terms and "数据" in terms and "rotat" in terms, terms
