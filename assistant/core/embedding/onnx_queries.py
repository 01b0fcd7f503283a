"""Question embeddings through ONNX Runtime: the same sentence-transformers model, 2-3x less latency.

A question is a few dozen tokens. PyTorch's eager mode spends most of such a forward pass dispatching
operators one by one (about 16 ms p50 for all-MiniLM-L6-v2 on one core here); ONNX Runtime runs the
same graph, fused, in about 7 ms, with vectors equal to PyTorch's within 1e-6
(docs/notes/retrieval-investigations.md, "Question embedding with ONNX Runtime"). Passages are still
embedded by PyTorch: ingestion embeds large batches, where dispatch cost is amortised.

The graph is exported once per model with PyTorch's own exporter (`torch.onnx.export(dynamo=True)`,
which needs `onnxscript`), from the model's sentence-transformers modules themselves (transformer,
pooling, normalisation), so any local sentence-transformers folder works, not only MiniLM. The file
lands in a cache folder under a key made of the model's files and the library versions; a stale or
broken file is never used. Each export is checked against PyTorch on probe questions before use.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

# Questions in both of the product's languages and of different lengths (padding is exercised).
PROBES = (
    "How many days of parental leave do I get?",
    "What do I have to set up on my laptop before I access company data, and who checks it?",
    "TiDB 如何备份数据？",
    "VPN",
)
# Largest absolute difference accepted between an ONNX and a PyTorch vector component (unit vectors;
# float32 reordering differs by ~1e-7).
MAX_DEVIATION = 1e-4
MODEL_FILE = "model.onnx"


class OnnxQueryEncoder:
    """An ONNX Runtime session that maps questions to unit vectors, `(n, dim)` float32.

    Args:
        path: the exported `.onnx` file (inputs `input_ids`, `attention_mask`; output `sentence_vector`).
        tokenizer: the model's Hugging Face tokenizer.
        max_length: the model's max_seq_length (tokens, specials included); longer questions are cut.
        threads: intra-op threads per call (1: questions are short, and concurrent calls run in
            parallel: `InferenceSession.run` is thread-safe).

    Raises:
        RuntimeError (onnxruntime's `Fail`): the file is not a loadable model.
    """

    def __init__(self, path: Path, tokenizer: Any, *, max_length: int, threads: int = 1):
        import onnxruntime as ort  # noqa: PLC0415 - onnxruntime: ~0.3 s, only when questions run on it

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initialisers are noise
        self.path = Path(path)
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = tokenizer
        self.max_length = max_length

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed questions. Returns `(len(texts), dim)` float32, L2-normalised."""
        batch = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="np"
        )
        feeds = {name: np.asarray(batch[name], dtype=np.int64) for name in ("input_ids", "attention_mask")}
        return np.asarray(self.session.run(["sentence_vector"], feeds)[0], dtype=np.float32)


def cache_key(model_path: Path, prefix: str = "") -> str:
    """A key that changes when the model's files, the query prefix or the exporting libraries change.

    Args:
        model_path: the sentence-transformers folder.
        prefix: the text put before every question (part of the behaviour, not of the graph; kept
            in the key so that two configurations never share a probe check).

    Returns:
        24 hex characters.
    """
    import onnxruntime  # noqa: PLC0415 - onnxruntime: ~0.3 s, not on import
    import torch  # noqa: PLC0415 - torch: ~4 s, not on import

    h = hashlib.sha256(f"{torch.__version__}\0{onnxruntime.__version__}\0{prefix}\0".encode())
    for file in sorted(p for p in Path(model_path).rglob("*") if p.is_file()):
        stat = file.stat()
        h.update(f"{file.relative_to(model_path)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return h.hexdigest()[:24]


def export(model_path: Path, folder: Path) -> Path:
    """Export a sentence-transformers model's question path to `folder/model.onnx`, atomically.

    The graph is written into a temporary sibling folder that is then renamed, so that a reader
    never sees half a file, and the weights of models over 2 GB (written beside the graph as
    external data) move with it.

    Args:
        model_path: the sentence-transformers folder; the exporter traces its own copy of the model
            (torch.export patches modules while tracing), so the copy that serves questions keeps
            serving them meanwhile.
        folder: the target folder (must not exist yet; its parent is created).

    Returns:
        The path of the graph.

    Raises:
        Exception: whatever the exporter raised (an architecture it cannot trace).
    """
    import torch  # noqa: PLC0415 - torch: ~4 s, only when exporting
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - ~8 s, only when exporting

    model = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)

    class _Questions(torch.nn.Module):
        def __init__(self, st: Any):
            super().__init__()
            self.st = st

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            features = self.st({"input_ids": input_ids, "attention_mask": attention_mask})
            return torch.nn.functional.normalize(features["sentence_embedding"], dim=-1)

    sample = model.tokenizer(list(PROBES[:2]), padding=True, return_tensors="pt")
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    # The exporter reports its progress and the operator sets it skips (torchvision's) as warnings
    # and log lines: noise in a server's log for an export that either works or is refused below.
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                _Questions(model).eval(),
                (sample["input_ids"], sample["attention_mask"]),
                input_names=["input_ids", "attention_mask"],
                output_names=["sentence_vector"],
                dynamic_shapes={"input_ids": {0: batch, 1: sequence}, "attention_mask": {0: batch, 1: sequence}},
                dynamo=True,
                verbose=False,
            )
    finally:
        exporter_log.setLevel(level)
    assert program is not None, "torch.onnx.export(dynamo=True) returns the program"
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's notes on dynamic axis names
            program.save(str(tmp / MODEL_FILE))
        try:
            os.replace(tmp, folder)
        except OSError:
            if not (folder / MODEL_FILE).is_file():  # another process did not finish the same export
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / MODEL_FILE


def deviation(encoder: OnnxQueryEncoder, reference: np.ndarray, texts: Sequence[str]) -> float:
    """Largest absolute difference between the encoder's vectors for `texts` and `reference` `(n, dim)`."""
    return float(np.abs(encoder.embed(texts) - reference).max())
