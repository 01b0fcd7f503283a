"""Questions embedded by ONNX Runtime equal PyTorch's; the graph is exported once, checked, and never
trusted when broken; the server switches to it on its own."""

from __future__ import annotations

import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from assistant.api.app import create_app
from assistant.core.embedding import onnx_queries
from assistant.core.embedding.embedder import Embedder
from assistant.core.resources import Resources
from assistant.core.settings import Settings
from tests.conftest import CORPUS_MODEL, make_settings

QUESTIONS = [
    "How many days of parental leave do I get?",
    "TiDB 如何备份数据？",
    "x",
    "Which laptop do I get and who pays for it? " * 60,  # over the model's 256 tokens: cut the same way
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    # Its own instance: the session's shared embedder may already have been switched by a server.
    return Embedder()


def test_onnx_vectors_equal_pytorch_and_the_export_is_reused(embedder):
    cache = Settings(_env_file=None).onnx_cache_dir
    torch_vectors = embedder.embed_queries(QUESTIONS)
    assert embedder.query_runtime == "torch"

    assert embedder.prepare_query_runtime(cache) == "onnx"
    graph = cache / onnx_queries.cache_key(embedder.path) / onnx_queries.MODEL_FILE
    exported_at = graph.stat().st_mtime_ns
    batch = embedder.embed_queries(QUESTIONS)
    assert batch.shape == (len(QUESTIONS), embedder.dim) and batch.dtype == np.float32
    assert np.abs(batch - torch_vectors).max() < 1e-5
    assert np.abs(embedder.embed_query(QUESTIONS[1]) - torch_vectors[1]).max() < 1e-5
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)

    # A second process (here: a second model instance) finds the graph and does not export again.
    other = Embedder()
    assert other.prepare_query_runtime(cache, export=False) == "onnx"
    assert graph.stat().st_mtime_ns == exported_at


def test_without_a_cached_graph_a_one_shot_command_stays_on_pytorch(tmp_path, embedder):
    fresh = Embedder()
    assert fresh.prepare_query_runtime(tmp_path / "empty", export=False) == "torch"
    assert not (tmp_path / "empty").exists()
    assert fresh.prepare_query_runtime(None) == "torch"


def test_a_broken_graph_is_refused_and_questions_stay_on_pytorch(tmp_path):
    fresh = Embedder()
    graph = tmp_path / onnx_queries.cache_key(fresh.path) / onnx_queries.MODEL_FILE
    graph.parent.mkdir(parents=True)
    graph.write_bytes(b"not an onnx model")
    expected = fresh.embed_query(QUESTIONS[0])

    assert fresh.prepare_query_runtime(tmp_path) == "torch"
    assert fresh.query_runtime_error  # the reason is kept (and logged)
    assert np.abs(fresh.embed_query(QUESTIONS[0]) - expected).max() < 1e-6


def test_a_graph_that_computes_something_else_fails_the_probe_check(tmp_path):
    # A loadable graph with the right inputs and output under the right key, whose vectors are not
    # the model's (a file swapped or damaged on disk): the comparison with PyTorch refuses it.
    import onnx
    from onnx import TensorProto, helper

    fresh = Embedder()
    dim = fresh.dim
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
            helper.make_node("ReduceMean", ["mask"], ["mean"], axes=[1], keepdims=1),
            helper.make_node("MatMul", ["mean", "spread"], ["sentence_vector"]),
        ],
        "constant-direction",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("sentence_vector", TensorProto.FLOAT, ["batch", dim])],
        [helper.make_tensor("spread", TensorProto.FLOAT, [1, dim], [dim**-0.5] * dim)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / onnx_queries.cache_key(fresh.path) / onnx_queries.MODEL_FILE
    path.parent.mkdir(parents=True)
    onnx.save(model, str(path))

    assert fresh.prepare_query_runtime(tmp_path, export=False) == "torch"
    assert "differ from PyTorch" in fresh.query_runtime_error


def test_the_server_moves_questions_to_onnx_and_keeps_answering(tmp_path):
    # MiniLM: the model whose questions start on PyTorch and move to an exported graph (e5 is ONNX throughout).
    settings = make_settings(tmp_path / "var", embedding_model=CORPUS_MODEL)
    res = Resources.open(settings)  # its own embedder, still on PyTorch
    try:
        app = create_app(settings, resources=res)
        with TestClient(app):
            deadline = time.monotonic() + 180
            while res.embedder.query_runtime != "onnx" and time.monotonic() < deadline:
                time.sleep(0.2)
            assert res.embedder.query_runtime == "onnx", res.embedder.query_runtime_error
            hits = app.state.assistant.retriever.retrieve("parental leave", principal=_anonymous(), top_k=3)
            assert hits == []  # an empty index answers with nothing, through the ONNX path
    finally:
        res.close()

    torch_settings = make_settings(tmp_path / "var-torch", embedding_model=CORPUS_MODEL, query_runtime="torch")
    res = Resources.open(torch_settings)
    try:
        assert res.prepare_query_runtime() == "torch"
    finally:
        res.close()


def _anonymous():
    from assistant.core.principals import ANONYMOUS

    return ANONYMOUS
