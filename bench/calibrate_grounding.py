"""Calibrate the lexical thresholds of `assistant.answering.grounding` on the corpus: `MIN_LEXICAL` (the
check without a judge) and `FAST_PATH_SHARE` (a near-copy is kept without asking the judge).

For each development question (tests/data/dev_questions.jsonl) the answering file is cut into
~1,500-character passages; the prompt's sources are simulated as the answering file's passages plus
passages of up to four other files of the same folder (the pages retrieval confuses it with).

- supported (copied): sentences of the answering passages, as an extractive model writes them;
- supported (reworded): the same with a third of their content words dropped and two words of a
  sentence of another page added, as a model that paraphrases writes them;
- unsupported: sentences of sibling pages that are not among the sources (same topic, other facts).

Prints, per language and kind, the median best lexical support and the share accepted at the
threshold; and the share of supported sentences rejected because they state a number absent from the
sources. With `--embedder MODEL` (e.g. builtin:multilingual-e5-small), also the sentence-to-passage
cosines of the same kinds (fewer sentences: embedding costs), and, across languages, the page whose
embedding and whose dictionary translation (`crosslingual.translate`) are closest to each of
`CROSS_LINGUAL` (Chinese renderings of handbook sentences, written for this calibration).
Run: PYTHONPATH=. python bench/calibrate_grounding.py [--embedder MODEL]
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import sys
from pathlib import Path

from assistant.answering.grounding import (
    FAST_PATH_SHARE,
    MIN_CLAIM_TERMS,
    MIN_LEXICAL,
    Grounder,
    content_terms,
    split_sentences,
)
from assistant.retrieval import RetrievedChunk

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO.parent / "shared" / "corpus").resolve()
ROOTS = {
    "en": CORPUS / "handbook-en" / "sourcegraph-handbook" / "content",
    "zh": CORPUS / "docs-zh" / "pingcap-docs-cn",
}
PASSAGE_CHARS = 1500
TECH_OPS = "departments/tech-ops/process"
CROSS_LINGUAL_PAGES = [
    f"{TECH_OPS}/internal-security/passwords.md", f"{TECH_OPS}/internal-security/computer-standards.md",
    f"{TECH_OPS}/internal-security/phishing-spoofing.md", f"{TECH_OPS}/internal-security/traveling.md",
    f"{TECH_OPS}/application_access_request.md", f"{TECH_OPS}/buyback.md", f"{TECH_OPS}/team_device_usage_privacy.md",
]
# (a Chinese rendering of a sentence of the page, index of the page in CROSS_LINGUAL_PAGES)
CROSS_LINGUAL = [
    ("密码最好有 15 个或更多字符。", 0),
    ("不要使用浏览器的自动填充功能，应该使用 1Password 浏览器扩展。", 0),
    ("每个系统都要创建一个新密码。", 0),
    ("使用数字、大小写字母和特殊字符的组合。", 0),
    ("不要混用个人密码和工作密码。", 0),
    ("设备必须启用加密。", 1),
    ("笔记本电脑屏幕应在闲置 10 分钟后锁定。", 1),
    ("设备上必须启用防火墙。", 1),
    ("所有电脑都应安装杀毒软件。", 1),
    ("电脑需要安装最新的安全补丁和系统更新。", 1),
    ("如有问题，请在 #ask-it-tech-ops Slack 频道提问。", 1),
    # Numbers the page states (the answers of 3 December's A/B that grounding removed were of this kind).
    ("出差前把笔记本电脑的锁屏时间从 5 分钟改为 1 或 2 分钟。", 3),
    ("密码至少要有 15 个字符。", 0),
]
FRONT_MATTER = re.compile(r"^\s*[a-z_]+:\s")
SHOW = bool(os.environ.get("SHOW"))


def passages(text: str) -> list[str]:
    """`text` cut at paragraph ends into passages of about `PASSAGE_CHARS`."""
    out, current = [], ""
    for para in text.split("\n\n"):
        if current and len(current) + len(para) > PASSAGE_CHARS:
            out.append(current)
            current = ""
        current += para + "\n\n"
    return out + ([current] if current.strip() else [])


def chunk(text: str, path: str, i: int) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=f"{path}-{i}", doc_id=path, chunk_index=i, text=text, source=path, uri="", title="", heading="",
        page=None, lang="", score=1.0, relevance=0.0,
    )


def claims(text: str) -> list[str]:
    """Sentences that state something: no headings, link lists, tables, HTML or code."""
    prose = [
        s.text for s in split_sentences(text)
        if not s.text.lstrip().startswith(("#", "- [", "* [", "<", "|", "`", ">")) and not FRONT_MATTER.match(s.text)
    ]
    return [s for s in prose if len(content_terms(s)) >= MIN_CLAIM_TERMS]


def reword(sentence: str, other: str, rng: random.Random) -> str:
    words = sentence.split()
    if len(words) < 4:  # Chinese: no spaces; drop the middle third of the characters instead
        third = len(sentence) // 3
        return sentence[:third] + sentence[2 * third :] + other[:4]
    kept = [w for i, w in enumerate(words) if i % 3 != 2]
    extra = [w for w in other.split() if w.isalpha()][:2]
    return " ".join(kept + extra)


def main() -> None:
    rng = random.Random(0)
    questions = [json.loads(line) for line in (REPO / "tests/data/dev_questions.jsonl").read_text().splitlines() if line]
    scores: dict[tuple[str, str], list[float]] = {}
    number_rejects: dict[str, list[bool]] = {}
    fast: dict[tuple[str, str], list[bool]] = {}
    for q in questions:
        root = ROOTS[q["lang"]]
        files = [root / f for f in q.get("answer_files", []) if (root / f).is_file()]
        if not files:
            continue
        answer_file = files[0]
        siblings = sorted(p for p in answer_file.parent.glob("*.md") if p != answer_file)
        rng.shuffle(siblings)
        own = passages(answer_file.read_text(encoding="utf-8"))[:3]
        sources = [chunk(t, answer_file.name, i) for i, t in enumerate(own)]
        for p in siblings[:4]:
            sources.append(chunk(passages(p.read_text(encoding="utf-8"))[0], p.name, 0))
        grounder = Grounder(sources)
        outside = [p for p in siblings[4:12]]
        for text in own:
            for sentence in claims(text)[:6]:
                foreign = claims(rng.choice(outside).read_text(encoding="utf-8")) if outside else []
                for kind, s in (("copied", sentence), ("reworded", reword(sentence, rng.choice(foreign or [""]), rng))):
                    terms = content_terms(s)
                    if not terms:
                        continue
                    best = max(grounder.lexical(terms, n) for n in range(1, len(sources) + 1))
                    scores.setdefault((q["lang"], kind), []).append(best)
                    verdict = grounder.attribute(split_sentences(s)[0])
                    fast.setdefault((q["lang"], kind), []).append(verdict.by == "copy")
                    if kind == "copied":
                        number_rejects.setdefault(q["lang"], []).append(verdict.by in ("numbers", "names") or verdict.echo)
        for p in outside:
            for sentence in claims(p.read_text(encoding="utf-8"))[:5]:
                best = max(grounder.lexical(content_terms(sentence), n) for n in range(1, len(sources) + 1))
                scores.setdefault((q["lang"], "unsupported"), []).append(best)
                fast.setdefault((q["lang"], "unsupported"), []).append(grounder.attribute(split_sentences(sentence)[0]).by == "copy")
                if SHOW and best >= MIN_LEXICAL:
                    print(f"accepted unsupported {best:.2f}: {sentence[:100]}")
    print(f"threshold MIN_LEXICAL = {MIN_LEXICAL}")
    print("lang  kind         sentences  median  p10   p90   accepted at 0.5 / 0.6 / 0.7")
    for (lang, kind), values in sorted(scores.items()):
        values.sort()
        accepted = " / ".join(f"{sum(v >= t for v in values) / len(values):.3f}" for t in (0.5, 0.6, 0.7))
        p10, p90 = values[len(values) // 10], values[(9 * len(values)) // 10]
        print(f"{lang:5} {kind:12} {len(values):9}  {statistics.median(values):.2f}   {p10:.2f}  {p90:.2f}  {accepted}")
    for lang, flags in sorted(number_rejects.items()):
        print(f"{lang}: copied sentences rejected by the rules (numbers, names, echo): {sum(flags) / len(flags):.3f}")
    print(f"taken as near-copies without the judge (FAST_PATH_SHARE = {FAST_PATH_SHARE}):")
    for (lang, kind), flags in sorted(fast.items()):
        print(f"{lang:5} {kind:12} {len(flags):9}  {sum(flags) / len(flags):.3f}")


def embedding_figures(model: str) -> None:
    """Cosines of copied / reworded / unsupported sentences (as in `main`, 3 a passage) and the
    cross-lingual attribution of `CROSS_LINGUAL`, with the product's embedder `model`."""
    from assistant.core.embedding.embedder import Embedder
    from assistant.retrieval import crosslingual

    embedder = Embedder(model)
    rng = random.Random(1)
    questions = [json.loads(line) for line in (REPO / "tests/data/dev_questions.jsonl").read_text().splitlines() if line]
    rows: dict[tuple[str, str], list[float]] = {}
    for q in questions:
        root = ROOTS[q["lang"]]
        files = [root / f for f in q.get("answer_files", []) if (root / f).is_file()]
        if not files:
            continue
        siblings = sorted(p for p in files[0].parent.glob("*.md") if p != files[0])
        rng.shuffle(siblings)
        own = passages(files[0].read_text(encoding="utf-8"))[:2]
        vectors = embedder.embed_passages(own + [passages(p.read_text(encoding="utf-8"))[0] for p in siblings[:2]])
        foreign = claims(siblings[-1].read_text(encoding="utf-8")) if siblings else []
        for j, text in enumerate(own):
            for sentence in claims(text)[:3]:
                for kind, s in (("copied", sentence), ("reworded", reword(sentence, rng.choice(foreign or [""]), rng))):
                    rows.setdefault((q["lang"], kind), []).append(float(vectors[j] @ embedder.embed_queries([s])[0]))
        for p in siblings[2:4]:
            for sentence in claims(p.read_text(encoding="utf-8"))[:3]:
                rows.setdefault((q["lang"], "unsupported"), []).append(float(max(vectors @ embedder.embed_queries([sentence])[0])))
    print(f"\ncosines ({model})\nlang  kind         sentences  p10    p50    p90    share >= 0.80 / 0.84 / 0.86")
    for (lang, kind), values in sorted(rows.items()):
        values.sort()
        n = len(values)
        shares = " / ".join(f"{sum(v >= t for v in values) / n:.2f}" for t in (0.80, 0.84, 0.86))
        print(f"{lang:5} {kind:12} {n:9}  {values[n // 10]:.3f}  {values[n // 2]:.3f}  {values[9 * n // 10]:.3f}  {shares}")
    root = ROOTS["en"]
    texts = [(root / p).read_text(encoding="utf-8") for p in CROSS_LINGUAL_PAGES]
    vectors = embedder.embed_passages([t[:2500] for t in texts])
    by_cosine = by_words = 0
    print("\nacross languages: page, closest by embedding, translation coverage of each page")
    for sentence, page in CROSS_LINGUAL:
        cosines = vectors @ embedder.embed_queries([sentence])[0]
        coverage = [crosslingual.translate(sentence).coverage(t) for t in texts]
        by_cosine += int(cosines.argmax()) == page
        by_words += coverage[page] > max(c for i, c in enumerate(coverage) if i != page)
        print(page, int(cosines.argmax()), " ".join(f"{c:.2f}" for c in coverage), sentence)
    print(f"right page closest by embedding: {by_cosine}/{len(CROSS_LINGUAL)}; highest coverage alone: {by_words}/{len(CROSS_LINGUAL)}")


if __name__ == "__main__":
    main()
    if "--embedder" in sys.argv:
        embedding_figures(sys.argv[sys.argv.index("--embedder") + 1])
