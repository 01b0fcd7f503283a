"""Calibrate the lexical support threshold of `assistant.answering.grounding` on the corpus.

For each development question (tests/data/dev_questions.jsonl) the answering file is cut into
~1,500-character passages; the prompt's sources are simulated as the answering file's passages plus
passages of up to four other files of the same folder (the pages retrieval confuses it with).

- supported (copied): sentences of the answering passages, as an extractive model writes them;
- supported (reworded): the same with a third of their content words dropped and two words of a
  sentence of another page added, as a model that paraphrases writes them;
- unsupported: sentences of sibling pages that are not among the sources (same topic, other facts).

Prints, per language and kind, the median best lexical support and the share accepted at the
threshold; and the share of supported sentences rejected because they state a number absent from the
sources. Run: PYTHONPATH=. python bench/calibrate_grounding.py
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
from pathlib import Path

from assistant.answering.grounding import MIN_CLAIM_TERMS, MIN_LEXICAL, Grounder, content_terms, split_sentences
from assistant.retrieval import RetrievedChunk

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO.parent / "shared" / "corpus").resolve()
ROOTS = {
    "en": CORPUS / "handbook-en" / "sourcegraph-handbook" / "content",
    "zh": CORPUS / "docs-zh" / "pingcap-docs-cn",
}
PASSAGE_CHARS = 1500
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
                    if kind == "copied":
                        number_rejects.setdefault(q["lang"], []).append(grounder.judge(split_sentences(s)[0]).source is None)
        for p in outside:
            for sentence in claims(p.read_text(encoding="utf-8"))[:5]:
                best = max(grounder.lexical(content_terms(sentence), n) for n in range(1, len(sources) + 1))
                scores.setdefault((q["lang"], "unsupported"), []).append(best)
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
        print(f"{lang}: copied sentences rejected by the full check (numbers, echo): {sum(flags) / len(flags):.3f}")


if __name__ == "__main__":
    main()
