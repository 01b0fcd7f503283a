"""Knowledge gaps: the questions the documents did not serve, grouped by meaning with the product's
embedding model, as a list of documents to write (largest group first)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from assistant.core.embedding.embedder import Embedder
from assistant.operations.store import GapQuestion

# Cosine similarity of a question to a group's mean at or above which it joins the group. With
# multilingual-e5-small, paraphrases of one question score about 0.9 and unrelated questions about 0.75.
DEFAULT_SIMILARITY = 0.85


@dataclass(frozen=True)
class KnowledgeGap:
    """A group of similar unserved questions: `topic` is its most central question (the document to
    write), `questions` all of them (newest first), with how many were "not found" and rated down."""

    topic: str
    questions: list[str]
    not_found: int
    rated_down: int


def group_gaps(gaps: Sequence[GapQuestion], embedder: Embedder, *, similarity: float = DEFAULT_SIMILARITY,
               limit: int = 20) -> list[KnowledgeGap]:
    """Group `gaps` by meaning: leader clustering (Hartigan, *Clustering Algorithms*, 1975, ch. 3) on
    L2-normalised question embeddings, each question joining the group whose mean is nearest when the
    cosine reaches `similarity`, else starting one.

    Args:
        gaps: the unserved questions, newest first.
        embedder: the product's embedding model (`embed_queries`: `(n, dim)` float32, L2-normalised).
        similarity: the cosine threshold, 0 to 1.
        limit: at most this many groups, largest first.

    Returns:
        The groups, largest first (ties: the newest question first).
    """
    if not gaps:
        return []
    vectors = np.asarray(embedder.embed_queries([g.question for g in gaps]), dtype=np.float32)
    members: list[list[int]] = []
    sums: list[np.ndarray] = []
    for i, vector in enumerate(vectors):
        if sums:
            means = np.stack([s / np.linalg.norm(s) for s in sums])
            scores = means @ vector
            best = int(np.argmax(scores))
            if scores[best] >= similarity:
                members[best].append(i)
                sums[best] = sums[best] + vector
                continue
        members.append([i])
        sums.append(vector.copy())
    groups = []
    for ids, total in zip(members, sums):
        centre = total / np.linalg.norm(total)
        topic = gaps[max(ids, key=lambda i: float(vectors[i] @ centre))].question
        groups.append(KnowledgeGap(
            topic=topic, questions=[gaps[i].question for i in ids],
            not_found=sum(gaps[i].why == "not_found" for i in ids), rated_down=sum(gaps[i].why == "rated_down" for i in ids),
        ))
    order = sorted(range(len(groups)), key=lambda k: (-len(groups[k].questions), min(members[k])))
    return [groups[k] for k in order[:limit]]
