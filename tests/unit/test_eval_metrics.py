"""Evaluation metrics (trec_eval through pytrec_eval), the question file format and the development set."""

import json
from pathlib import Path

import pytest

from assistant.core.errors import InvalidRequestError
from assistant.evaluation.dataset import load_questions
from assistant.evaluation.metrics import contains_key_fact, document_ranking, percentile_ms, ranking_metrics
from assistant.evaluation.runner import QuestionResult, aggregate, is_abstention

REPO = Path(__file__).resolve().parents[2]
DEV_SET = REPO / "tests" / "data" / "dev_questions.jsonl"
ROOTS = {
    "handbook": REPO.parent / "shared/corpus/handbook-en/sourcegraph-handbook/content",
    "docs-zh": REPO.parent / "shared/corpus/docs-zh/pingcap-docs-cn",
}


def test_document_ranking_keeps_each_document_at_its_best_chunk():
    assert document_ranking(["a", "b", "a", "c", "b", "d"], depth=3) == ["a", "b", "c"]


def test_ranking_metrics_by_hand():
    scores = ranking_metrics(
        {"q1": ["x", "y", "z"], "q2": ["p"], "q3": [], "q4": ["m"]},
        {"q1": ["y", "w"], "q2": ["p"], "q3": ["k"], "q4": []},
    )
    assert set(scores) == {"q1", "q2", "q3"}  # q4 has no answer: not ranked
    q1 = scores["q1"]
    assert (q1["recall@1"], q1["recall@5"], q1["mrr@10"]) == (0.0, 1.0, 0.5)
    # nDCG@10: one relevant at rank 2 (gain 1/log2 3), ideal has two relevant at ranks 1-2
    ideal = 1 + 1 / 1.584962500721156
    assert q1["ndcg@10"] == pytest.approx((1 / 1.584962500721156) / ideal)
    assert scores["q2"] == {"recall@1": 1.0, "recall@5": 1.0, "recall@10": 1.0, "mrr@10": 1.0, "ndcg@10": 1.0}
    assert all(v == 0.0 for v in scores["q3"].values())


def test_mrr_and_recall_stop_at_ten():
    docs = [f"d{i}" for i in range(12)]
    scores = ranking_metrics({"q": docs}, {"q": ["d11"]})["q"]
    assert scores["recall@10"] == 0.0 and scores["mrr@10"] == 0.0


def test_key_facts_and_abstention_text():
    assert contains_key_fact("Use at least 15  characters.", ["15 characters"])
    assert not contains_key_fact("No idea", ["15"])
    assert is_abstention("I could not find this in the documents you can access.")
    assert is_abstention("在您有权访问的文档中没有找到相关内容。")
    assert not is_abstention("Set skip-grant-table [1].")
    assert is_abstention("Sorry, I couldn't find any information about a dress code in the provided documents.")
    assert is_abstention("文档中未找到关于停车位的信息。")
    # Finding words in an instruction is not a decline (the trial's false positive).
    assert not is_abstention("If you cannot find the Okta Verify app, reinstall it from the App Store [1].")
    assert not is_abstention("如果找不到 TiDB 进程，请检查 systemd 日志 [2]。")


def test_aggregate_rates_and_latency():
    rows = [
        QuestionResult("a", "en", True, ["x"], 0.010, False, {"recall@1": 1.0}),
        QuestionResult("b", "en", True, ["y"], 0.020, True, {"recall@1": 0.0}),
        QuestionResult("c", "en", False, [], 0.030, True),
    ]
    out = aggregate(rows)
    assert out["recall@1"] == 0.5 and out["gate_answer_rate"] == 0.5 and out["gate_abstention_rate"] == 1.0
    assert out["latency_p50_ms"] == pytest.approx(20.0)
    assert percentile_ms([], 95) is None


def test_key_fact_rate_counts_only_questions_that_name_key_facts():
    with_facts = QuestionResult("a", "en", True, ["x"], 0.01, False, answer="ok", abstained=False, has_key_fact=True)
    without = QuestionResult("b", "en", True, ["x"], 0.01, False, answer="ok", abstained=False, has_key_fact=None)
    assert aggregate([with_facts, without])["has_key_fact"] == 1.0


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": "1", "lang": "fr", "question": "q"}', r"q.jsonl:1: .*lang: Input should be 'en' or 'zh'"),
        ('{"lang": "en", "question": "q"}', r"q.jsonl:1: .*id: missing"),
        ("not json", r"q.jsonl:1: not a question object"),
        # A typo or a wrong type would silently turn an answerable question into a no-answer one.
        ('{"id": "1", "lang": "en", "question": "q", "answer_file": ["a.md"]}', "answer_file: unknown field"),
        ('{"id": "1", "lang": "en", "question": "q", "answer_files": "a.md"}', "answer_files: .*valid (array|list)"),
        ('{"id": "1", "lang": "en", "question": null}', "question: .*valid string"),
        ('{"id": "1", "lang": "en", "question": "' + "x" * 4001 + '"}', "4001 characters; at most 4000"),
        ('{"id": "1", "lang": "en", "question": "   "}', "the question is empty"),
    ],
)
def test_bad_question_files_are_refused_with_the_line(tmp_path, line, message):
    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InvalidRequestError, match=message):
        load_questions(path)


def test_question_files_that_are_not_utf8_text_or_not_files_are_refused(tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"id": "1", "lang": "en", "question": "café"}\n'.encode("latin-1"))
    with pytest.raises(InvalidRequestError, match=r"latin.jsonl: not UTF-8 text \(byte 0xe9"):
        load_questions(latin)
    with pytest.raises(InvalidRequestError, match="is a folder"):
        load_questions(tmp_path)
    with pytest.raises(InvalidRequestError, match="no such question file"):
        load_questions(tmp_path / "missing.jsonl")
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + b'{"id": 7, "lang": "zh", "question": "\xe4\xbd\xa0\xe5\xa5\xbd"}\n')
    assert [(q.id, q.question) for q in load_questions(bom)] == [("7", "你好")]


def test_development_set_is_balanced_and_its_answer_files_exist():
    questions = load_questions(DEV_SET)
    assert len(questions) >= 60
    langs = [q.lang for q in questions]
    assert langs.count("en") == langs.count("zh")
    assert sum(not q.answerable for q in questions) >= 10
    for q in questions:
        assert (q.lang == "zh") == any("\u4e00" <= ch <= "\u9fff" for ch in q.question), q.id
        for rel in q.answer_files:
            files = [root / rel for root in ROOTS.values() if (root / rel).is_file()]
            assert files, (q.id, rel)
            text = files[0].read_text(encoding="utf-8").lower()
            assert any(f.lower() in text for f in q.must_contain_any), (q.id, rel)
    # cross-lingual questions in both directions
    handbook = {q.id for q in questions if any((ROOTS["handbook"] / f).is_file() for f in q.answer_files)}
    assert {q.id for q in questions if q.lang == "zh"} & handbook
    assert {q.id for q in questions if q.lang == "en" and q.answerable} - handbook
    assert all(json.loads(line)["id"] for line in DEV_SET.read_text(encoding="utf-8").splitlines())
