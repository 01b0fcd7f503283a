"""The finetune run's configuration, taken once from settings: LoRA hyperparameters, paths and the gate."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from assistant.core.errors import ConfigError, InvalidRequestError
from assistant.core.llm.model_files import configured_gguf_path
from assistant.core.principals import EVERYONE
from assistant.core.settings import Settings
from assistant.core.settings.features import VLLM_LORA_MODULES, VLLM_MAX_LORA_RANK, FinetuneSettings

__all__ = [
    "VLLM_LORA_MODULES", "VLLM_MAX_LORA_RANK", "SERVED", "SMOLLM2", "FinetuneConfig", "LoraHyperparameters",
    "check_audience", "training_base", "TRAINING_WEIGHTS", "training_weights",
]

_DEFAULTS = FinetuneSettings()  # the defaults of ASSISTANT_FINETUNE_*, for values built without settings
SERVED = "served"  # ASSISTANT_FINETUNE_BASE_MODEL's default: the GGUF that ASSISTANT_LLM_MODEL serves
SMOLLM2 = "builtin:smollm2-135m"
# The GPU path (deploy/vllm/h100.yaml, h200.yaml): vLLM serves the FP8 checkpoint with LoRA; the adapter
# is trained on the same model's bf16 weights (same architecture and module names, so the adapter fits
# the FP8 model; vLLM applies LoRA in bf16 beside the FP8 base). Served model -> training weights.
TRAINING_WEIGHTS = {"Qwen/Qwen3-32B-FP8": "Qwen/Qwen3-32B"}
_AUDIENCE = re.compile(r"^(everyone|group:[^\s:]+)$")


@dataclass(frozen=True)
class LoraHyperparameters:
    """LoRA and optimiser values (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models").

    Attributes:
        rank: r, the rank of the update B @ A.
        alpha: the update is scaled by alpha / rank.
        target_modules: the linear layers adapted (a subset of `VLLM_LORA_MODULES`).
        learning_rate: AdamW's peak rate.
        epochs: passes over the training split.
        batch_size: examples per optimiser step.
        max_length_tokens: longer examples are cut to this many tokens.
    """

    rank: int = _DEFAULTS.lora_rank
    alpha: int = _DEFAULTS.lora_alpha
    target_modules: tuple[str, ...] = tuple(_DEFAULTS.target_modules)
    learning_rate: float = _DEFAULTS.learning_rate
    epochs: int = _DEFAULTS.epochs
    batch_size: int = _DEFAULTS.batch_size
    max_length_tokens: int = _DEFAULTS.max_length_tokens

    def __post_init__(self) -> None:
        if not 1 <= self.rank <= VLLM_MAX_LORA_RANK:
            raise InvalidRequestError(f"LoRA rank {self.rank} is outside 1..{VLLM_MAX_LORA_RANK} (vLLM's max-lora-rank)")
        unknown = sorted(set(self.target_modules) - set(VLLM_LORA_MODULES))
        if unknown or not self.target_modules:
            raise InvalidRequestError(f"target modules {unknown or '[]'} cannot be loaded by vLLM; use {VLLM_LORA_MODULES}")

    @classmethod
    def from_section(cls, finetune: FinetuneSettings) -> LoraHyperparameters:
        """The hyperparameters of `settings.finetune` (`ASSISTANT_FINETUNE_LORA_*` and the optimiser's)."""
        return cls(
            rank=finetune.lora_rank, alpha=finetune.lora_alpha, target_modules=tuple(finetune.target_modules),
            learning_rate=finetune.learning_rate, epochs=finetune.epochs, batch_size=finetune.batch_size,
            max_length_tokens=finetune.max_length_tokens,
        )

    def to_dict(self) -> dict:
        """JSON-ready values (stored with the adapter)."""
        return {**asdict(self), "target_modules": list(self.target_modules)}


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything one refresh needs besides its collaborators.

    Attributes:
        root: folder of datasets (`datasets/`), adapters (`adapters/NAME/`) and run logs.
        base_model: what the adapter is trained on and recorded with: the path of the GGUF that
            llama.cpp serves (dequantised; `training_base`), or a local transformers folder
            (production: the bf16 weights of the model vLLM serves).
        heldout_share: share of rows kept out of training for the gate, in [0, 1).
        qa_per_chunk / max_new_chunks: question-answer pairs written per new chunk, chunks used.
        gate_tolerance: a candidate may score worse than live by this share of live's score.
        canary_share: share of users served the canary, in [0, 1].
        eval_questions: the `assistant eval` question file the gate also scores (None: none).
        answer_questions: how many of its questions (the first) candidate and live answer in the gate
            (0: likelihoods only).
        answer_max_tokens: the longest answer generated per question, in tokens.
        answer_tolerance: the largest drop allowed in the share of questions answered right, in [0, 1].
    """

    root: Path
    base_model: str = SMOLLM2
    lora: LoraHyperparameters = field(default_factory=LoraHyperparameters)
    heldout_share: float = _DEFAULTS.heldout_share
    qa_per_chunk: int = _DEFAULTS.qa_per_chunk
    max_new_chunks: int = _DEFAULTS.max_new_chunks
    gate_tolerance: float = _DEFAULTS.gate_tolerance
    canary_share: float = _DEFAULTS.canary_share
    eval_questions: Path | None = _DEFAULTS.eval_questions
    answer_questions: int = 0  # built without settings: likelihoods only
    answer_max_tokens: int = _DEFAULTS.gate_answer_max_tokens
    answer_tolerance: float = _DEFAULTS.gate_answer_tolerance

    @classmethod
    def from_settings(cls, settings: Settings) -> FinetuneConfig:
        """The configuration of `settings.finetune` (`ASSISTANT_FINETUNE_*`), rooted at `settings.finetune_path`."""
        finetune = settings.finetune
        return cls(
            root=settings.finetune_path, base_model=training_base(settings), lora=LoraHyperparameters.from_section(finetune),
            heldout_share=finetune.heldout_share, qa_per_chunk=finetune.qa_per_chunk,
            max_new_chunks=finetune.max_new_chunks, gate_tolerance=finetune.gate_tolerance,
            canary_share=finetune.canary_share, eval_questions=finetune.eval_questions,
            answer_questions=finetune.gate_answer_questions, answer_max_tokens=finetune.gate_answer_max_tokens,
            answer_tolerance=finetune.gate_answer_tolerance,
        )


def training_base(settings: Settings) -> str:
    """The base the adapters are trained on, which must be the model that answers.

    With the embedded llama.cpp backend that is the GGUF that `ASSISTANT_LLM_MODEL` (or
    `ASSISTANT_LLM_MODEL_PATH`) serves, dequantised for training: `ASSISTANT_FINETUNE_BASE_MODEL` is
    `served` (the default) or names that same file. With the `openai` backend (vLLM) it is the local
    folder of the served model's bf16 weights, which `served` cannot name.

    Returns:
        The GGUF's absolute path (llama_cpp) or the configured folder (openai).

    Raises:
        ConfigError: a configured base other than the served model (both named), or `served` with the
            openai backend.
    """
    configured = settings.finetune.base_model
    if settings.llm.backend != "llama_cpp":
        if configured == SERVED:
            raise ConfigError(
                "ASSISTANT_FINETUNE_BASE_MODEL=served names no folder with the openai backend: set it to the bf16 "
                f"weights of the model vLLM serves ({settings.llm.openai_model!r})"
            )
        return configured
    served = configured_gguf_path(settings).resolve()
    if configured == SERVED:
        return str(served)
    if configured.startswith("builtin:"):
        name = "smollm2" if configured == SMOLLM2 else configured.removeprefix("builtin:")
        same = not settings.llm.model_path and name == settings.llm.model
    else:
        same = Path(configured).resolve() == served
    if not same:
        raise ConfigError(
            f"ASSISTANT_FINETUNE_BASE_MODEL={configured!r} is not the model that answers: llama.cpp serves {str(served)!r} "
            f"(ASSISTANT_LLM_MODEL={settings.llm.model!r}, ASSISTANT_LLM_MODEL_PATH={settings.llm.model_path!s}); an "
            "adapter trained on another base would not fit it. Set ASSISTANT_FINETUNE_BASE_MODEL=served"
        )
    return str(served)


def training_weights(served_model: str) -> str:
    """The bf16 weights (Hugging Face repository) an adapter for vLLM's `served_model` is trained on.

    Raises:
        ConfigError: no training weights are known for that model.
    """
    if served_model not in TRAINING_WEIGHTS:
        raise ConfigError(f"no bf16 training weights are known for the served model {served_model!r}: {TRAINING_WEIGHTS}")
    return TRAINING_WEIGHTS[served_model]


def check_audience(audience: str) -> str:
    """`audience` if it names a whole audience an adapter can serve (`everyone` or `group:NAME`).

    Raises:
        InvalidRequestError: anything else (a single user is no audience for a shared adapter).
    """
    audience = audience.strip()
    if not _AUDIENCE.match(audience):
        raise InvalidRequestError(f"adapter audience {audience!r} must be {EVERYONE!r} or 'group:NAME'")
    return audience
