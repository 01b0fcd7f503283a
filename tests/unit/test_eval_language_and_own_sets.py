"""The answer-language metric of `assistant eval`, and the team's own question sets (dev2 and the
held-out half kept aside): valid for `assistant eval`, answer files that exist, key facts that are in them."""

from pathlib import Path

import pytest

from assistant.core.language import answer_language
from assistant.evaluation.dataset import load_questions
from assistant.evaluation.runner import QuestionResult, aggregate

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
OWN_SETS = (DATA / "dev2_questions.jsonl", DATA / "heldout_own_questions.jsonl")
ROOTS = {
    "handbook": REPO.parent / "shared/corpus/handbook-en/sourcegraph-handbook/content",
    "docs-zh": REPO.parent / "shared/corpus/docs-zh/pingcap-docs-cn",
}


@pytest.mark.parametrize(
    "answer, lang",
    [
        ("Passwords must be at least 15 characters long [1].", "en"),
        ("在配置文件的 security 部分添加 skip-grant-table，然后重启 TiDB [1]。", "zh"),
        # identifiers, commands, paths and links do not make a Chinese answer English
        ("使用 `tiup cluster upgrade <cluster-name> v8.5.0` 升级 TiDB 集群，详见 docs/upgrade-tidb-using-tiup.md。", "zh"),
        ("请参考 [升级文档](https://docs.pingcap.com/zh/tidb/stable/upgrade-tidb-using-tiup) 中的 TiUP 步骤。", "zh"),
        # an English answer quoting a Chinese term is still English
        ("The page calls it 内存 (memory); set tidb_mem_quota_query to cap one statement.", "en"),
        ("I could not find this in the documents you can access.", "en"),
        ("", None),
        ("[1] [2]", None),
    ],
)
def test_answer_language(answer, lang):
    assert answer_language(answer) == lang


def test_same_language_rate_counts_declines_and_only_answered_questions():
    def result(qid, lang, answerable, same):
        return QuestionResult(
            id=qid, lang=lang, answerable=answerable, documents=[], latency_s=0.01, gate_abstained=False,
            answer="x", abstained=not answerable, same_language=same, answer_lang=lang if same else "en",
        )

    results = [result("a", "zh", True, True), result("b", "zh", False, False), result("c", "zh", True, True)]
    assert aggregate(results)["same_language"] == pytest.approx(2 / 3)  # the decline in English counts
    skipped = QuestionResult(id="d", lang="en", answerable=True, documents=[], latency_s=0.01, gate_abstained=False)
    assert "same_language" not in aggregate([skipped])  # answers were not generated


def test_own_question_sets_are_valid_balanced_and_judged_against_the_files():
    splits = [load_questions(path) for path in OWN_SETS]  # what `assistant eval` checks first
    ids = [q.id for split in splits for q in split]
    assert len(ids) == len(set(ids)), "an id appears in both splits"
    everything = [q for split in splits for q in split]
    for lang in ("en", "zh"):
        assert sum(q.lang == lang for q in everything) >= 30
    handbook = lambda q: any((ROOTS["handbook"] / f).is_file() for f in q.answer_files)  # noqa: E731
    for split in splits:
        assert abs(len(split) - len(everything) / 2) <= 1  # halves
        for lang in ("en", "zh"):
            mine = [q for q in split if q.lang == lang]
            assert sum(not q.answerable for q in mine) >= 3, lang
            # cross-lingual in both directions: English questions on the Chinese docs and the reverse
            assert any(q.answerable and handbook(q) != (lang == "en") for q in mine), lang
    for q in everything:
        assert (q.lang == "zh") == any("\u4e00" <= ch <= "\u9fff" for ch in q.question), q.id
        assert bool(q.answer_files) == bool(q.must_contain_any), q.id
        for rel in q.answer_files:
            files = [root / rel for root in ROOTS.values() if (root / rel).is_file()]
            assert files, (q.id, rel)
            text = " ".join(files[0].read_text(encoding="utf-8").lower().split())
            assert any(" ".join(f.lower().split()) in text for f in q.must_contain_any), (q.id, rel)


def test_the_table_shows_the_answer_language_row_only_when_answers_were_generated():
    from rich.console import Console

    from assistant.cli.evaluation import render_table
    from assistant.evaluation.runner import EvalReport

    def shown(results):
        report = EvalReport(config={}, questions=results, groups={"all": aggregate(results)})
        console = Console(width=200, record=True)
        console.print(render_table(report))
        return console.export_text()

    answered = QuestionResult(id="a", lang="zh", answerable=True, documents=[], latency_s=0.01, gate_abstained=False,
                              answer="答案", abstained=False, answer_lang="zh", same_language=True)
    assert "answer in the question's language" in shown([answered])
    skipped = QuestionResult(id="b", lang="zh", answerable=True, documents=[], latency_s=0.01, gate_abstained=False)
    assert "answer in the question's language" not in shown([skipped])
