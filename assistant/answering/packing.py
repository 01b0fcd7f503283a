"""Context packing: choose and shape the retrieved chunks that go into the prompt, within a token budget.

Steps, in rank order: near-duplicate chunks are dropped (Jaccard resemblance of character shingles,
Broder, "On the resemblance and containment of documents", 1997); retrieved chunks that are neighbours
in one document are merged into one source (their shared overlap kept once), so the model reads a
passage whole; each document gets at most `max_per_document` sources, so that one long page cannot
crowd out the others; then sources are kept while they fit the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from assistant.retrieval import RetrievedChunk

SHINGLE_CHARS = 5
# Costs added per source block besides its text: the blank lines between blocks.
BLOCK_SEPARATOR_TOKENS = 2
_GRAM_BASE = np.uint64(1_099_511_628_211)  # the 64-bit FNV prime, as a polynomial base


def shingles(text: str, size: int = SHINGLE_CHARS) -> frozenset[int]:
    """Hashes of the character `size`-grams of `text` with white space collapsed (language-neutral: works
    for Chinese, which has no spaces, as for English); a text of `size` characters or fewer is one gram.

    Each gram is hashed as a polynomial of its code points modulo 2**64 (numpy's wrapping uint64
    arithmetic), all grams at once: about half the CPU of building the grams as strings, which a chat
    paid for every retrieved chunk (issue 38). Two distinct grams share a hash with probability ~2**-64.
    """
    flat = " ".join(text.lower().split())
    if not flat:
        return frozenset()
    codes = np.frombuffer(flat.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    count = max(len(codes) - size + 1, 1)
    width = min(size, len(codes))
    grams = codes[:count].copy()
    for k in range(1, width):
        grams = grams * _GRAM_BASE + codes[k : k + count]
    return frozenset(grams.tolist())


def resemblance(a: frozenset[int], b: frozenset[int]) -> float:
    """Jaccard resemblance |a & b| / |a | b| of two shingle sets, in [0, 1] (the union's size is
    counted, not built)."""
    if not a and not b:
        return 1.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def merge_texts(first: str, second: str, *, min_overlap_chars: int = 12) -> str:
    """`first` followed by `second`, with the longest suffix of `first` that starts `second` kept once
    (consecutive chunks of one section share `chunk_overlap_tokens` of text)."""
    limit = min(len(first), len(second))
    for size in range(limit, min_overlap_chars - 1, -1):
        if first.endswith(second[:size]):
            return first + second[size:]
    return first.rstrip() + "\n" + second.lstrip()


def pack_context(
    chunks: Sequence[RetrievedChunk],
    *,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
    format_source: Callable[[int, RetrievedChunk], str],
    max_per_document: int = 3,
    duplicate_threshold: float = 0.8,
    merge_neighbours: bool = True,
    shape: Callable[[RetrievedChunk], RetrievedChunk] | None = None,
    one_source_per_document: bool = False,
    refit: Callable[[RetrievedChunk, int], RetrievedChunk] | None = None,
    min_refit_tokens: int = 40,
) -> list[RetrievedChunk]:
    """The sources for the prompt, best first.

    Args:
        chunks: retrieved chunks, best first.
        budget_tokens: room for the source blocks, in the LLM's tokens.
        count_tokens: the LLM's token counter.
        format_source: renders source `n` as it will appear in the prompt (its cost is counted).
        max_per_document: most sources taken from one document (after merging neighbours).
        duplicate_threshold: a chunk whose shingle resemblance to a kept one reaches this is dropped.
        merge_neighbours: merge chunks `i` and `i + 1` of one document into one source.
        shape: applied to each source after merging, before its cost is counted (e.g. `focus.focus_text`
            keeping the part of a long source that is about the question); None = sources whole.
        one_source_per_document: a document's chunks that are not neighbours are joined into one source
            as well (in document order), before `shape`: a focused source then picks the sentences about
            the question from all of them, within one source's room (issue 42: near-tie chunks of a
            page, where the ranking cannot tell which one holds the answer).
        refit: `(source, max_tokens) -> source` cut to `max_tokens` of text (the focus with another cap): a
            source that does not fit the room left after `shape` is cut to that room (less its header) and
            kept, when the room is at least `min_refit_tokens`; so that the room a first focused source
            leaves goes to the next document instead of being lost. None: such a source is left out.
        min_refit_tokens: the smallest room, in tokens of text, that `refit` fills.

    Returns:
        Sources that fit in `budget_tokens`; a merged source keeps the ID, score and relevance of its
        best-ranked part, and the `chunk_index` of its first part.
    """
    kept: list[RetrievedChunk] = []
    kept_shingles: list[frozenset[int]] = []
    spans: list[tuple[str, int, int]] = []  # (doc_id, first chunk_index, last chunk_index) of each kept source
    for chunk in chunks:
        grams = shingles(chunk.text)
        if any(resemblance(grams, other) >= duplicate_threshold for other in kept_shingles):
            continue
        if merge_neighbours and _merge_into(kept, spans, chunk, any_part=one_source_per_document):
            kept_shingles.append(grams)
            continue
        kept.append(chunk)
        kept_shingles.append(grams)
        spans.append((chunk.doc_id, chunk.chunk_index, chunk.chunk_index))

    per_document: dict[str, int] = {}
    packed: list[RetrievedChunk] = []
    used = 0
    for chunk in kept:
        if per_document.get(chunk.doc_id, 0) >= max_per_document:
            continue
        if shape is not None:
            chunk = shape(chunk)
        cost = count_tokens(format_source(len(packed) + 1, chunk)) + BLOCK_SEPARATOR_TOKENS
        if used + cost > budget_tokens and refit is not None:
            header = count_tokens(format_source(len(packed) + 1, replace(chunk, text=""))) + BLOCK_SEPARATOR_TOKENS
            room = budget_tokens - used - header
            if room >= min_refit_tokens:
                chunk = refit(chunk, room)
                cost = count_tokens(format_source(len(packed) + 1, chunk)) + BLOCK_SEPARATOR_TOKENS
        if used + cost > budget_tokens:
            continue
        packed.append(chunk)
        used += cost
        per_document[chunk.doc_id] = per_document.get(chunk.doc_id, 0) + 1
    return packed


def _merge_into(
    kept: list[RetrievedChunk], spans: list[tuple[str, int, int]], chunk: RetrievedChunk, *, any_part: bool = False
) -> bool:
    for i, (doc_id, first, last) in enumerate(spans):
        if doc_id != chunk.doc_id:
            continue
        if any_part and chunk.chunk_index > last + 1:
            kept[i] = replace(kept[i], text=kept[i].text.rstrip() + "\n…\n" + chunk.text.lstrip())
            spans[i] = (doc_id, first, chunk.chunk_index)
            return True
        if any_part and chunk.chunk_index < first - 1:
            kept[i] = replace(
                kept[i], text=chunk.text.rstrip() + "\n…\n" + kept[i].text.lstrip(), chunk_index=chunk.chunk_index,
                heading=chunk.heading or kept[i].heading,
            )
            spans[i] = (doc_id, chunk.chunk_index, last)
            return True
        if chunk.chunk_index == last + 1:
            kept[i] = replace(kept[i], text=merge_texts(kept[i].text, chunk.text))
            spans[i] = (doc_id, first, chunk.chunk_index)
            return True
        if chunk.chunk_index == first - 1:
            kept[i] = replace(
                kept[i], text=merge_texts(chunk.text, kept[i].text), chunk_index=chunk.chunk_index,
                heading=chunk.heading or kept[i].heading,
            )
            spans[i] = (doc_id, chunk.chunk_index, last)
            return True
    return False
