"""LoRA training with peft and the transformers Trainer: resumable from checkpoints, logged step by step,
saved in the PEFT format vLLM loads (adapter_config.json + adapter_model.safetensors)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import safe_open

from assistant.adapters.gguf_lora import ARCHITECTURES, GGUF_ADAPTER_FILE, export_gguf_lora
from assistant.core.errors import InvalidRequestError
from finetune.base_model import chat_prompt, load_base
from finetune.config import VLLM_LORA_MODULES, VLLM_MAX_LORA_RANK, LoraHyperparameters, training_weights
from finetune.dataset import Row

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


@dataclass(frozen=True)
class TrainResult:
    """A trained adapter: its folder, the files with their SHA-256, steps, the last training loss, the
    tokens trained on and seconds spent."""

    path: Path
    files: dict[str, str]
    steps: int
    loss: float | None
    tokens: int
    seconds: float


def encode(rows: list[Row], tokenizer: Any, max_length: int) -> list[dict[str, list[int]]]:
    """Token IDs of each row (the chat template's user turn, then the answer and end of turn) with
    `labels` = -100 over the prompt, so that only the answer is learned; cut to `max_length` tokens."""
    out = []
    for row in rows:
        prompt = tokenizer(chat_prompt(tokenizer, row.question), add_special_tokens=False)["input_ids"]
        answer = tokenizer(row.answer + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"]
        ids = (prompt + answer)[:max_length]
        labels = ([-100] * len(prompt) + answer)[:max_length]
        out.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels})
    return out


def _collate(pad_id: int) -> Callable[[list[dict]], dict]:
    def collate(batch: list[dict]) -> dict:
        import torch  # noqa: PLC0415 - torch: ~4 s, only when training

        width = max(len(b["input_ids"]) for b in batch)
        pad = lambda seq, value: seq + [value] * (width - len(seq))  # noqa: E731
        return {
            "input_ids": torch.tensor([pad(b["input_ids"], pad_id) for b in batch]),
            "attention_mask": torch.tensor([pad(b["attention_mask"], 0) for b in batch]),
            "labels": torch.tensor([pad(b["labels"], -100) for b in batch]),
        }

    return collate


def file_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 (hex) of each adapter file in `folder` (and of its GGUF export for llama.cpp, when written)."""
    names = [*ADAPTER_FILES, *([GGUF_ADAPTER_FILE] if (folder / GGUF_ADAPTER_FILE).is_file() else [])]
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in names}


def train_adapter(rows: list[Row], *, base_model: str, hp: LoraHyperparameters, out_dir: Path,
                  log_path: Path, progress: Callable[[dict], None] | None = None, max_steps: int = -1) -> TrainResult:
    """Train a LoRA adapter on the `train` rows and save it to `out_dir` (PEFT's format, and, when the
    base is a served GGUF of a `qwen2` model, llama.cpp's GGUF LoRA `adapter.gguf` beside it).

    Checkpoints go to `out_dir/checkpoints` every epoch; a run started again over the same folder
    resumes from the newest (after a kill). Each logged step (step, epoch, loss, learning rate) is
    appended to `log_path` as a JSON line and passed to `progress`. The log holds no training text.

    Args:
        rows: the snapshot's rows (only `split == "train"` are used).
        base_model: see `finetune.base_model.load_base`.
        hp: LoRA rank, alpha, modules, learning rate, epochs, batch size, max length.
        max_steps: stop after this many optimiser steps (-1: the epochs decide); for tests of resuming.

    Returns:
        The adapter's folder, files (with `adapter.gguf` when exported) and hashes, steps, last loss, tokens and seconds.

    Raises:
        InvalidRequestError: no training rows.
    """
    import torch  # noqa: PLC0415 - torch: ~4 s, only when training
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415 - peft: ~10 s, only when training
    from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: PLC0415 - transformers: ~2 s, only when training

    train = [r for r in rows if r.split == "train"]
    if not train:
        raise InvalidRequestError("the dataset has no training rows: nothing to train an adapter on")
    gpu = torch.cuda.is_available()
    model, tokenizer = load_base(base_model, dtype="bfloat16" if gpu else "float32")
    model = get_peft_model(model, LoraConfig(
        r=hp.rank, lora_alpha=hp.alpha, target_modules=list(hp.target_modules), lora_dropout=0.0,
        bias="none", task_type="CAUSAL_LM",
    ))
    data = encode(train, tokenizer, hp.max_length_tokens)
    tokens = sum(len(d["input_ids"]) for d in data) * hp.epochs
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    checkpoints = out_dir / "checkpoints"

    class _Log(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            entry = {"step": state.global_step, "max_steps": state.max_steps, "epoch": round(state.epoch or 0, 3),
                     **{k: v for k, v in (logs or {}).items() if isinstance(v, (int, float))}}
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
            if progress is not None:
                progress(entry)

    # The rate warms up over the first 10 % of steps and decays linearly to 0: at a constant 3e-3 a few
    # rows' loss fell to 0.01 by step 12, then swung back to 0.9-1.9 (gradient norms up to 49) and the
    # adapter answered a garbled fact (7 December 2026).
    args = TrainingArguments(
        output_dir=str(checkpoints), num_train_epochs=hp.epochs, max_steps=max_steps,
        per_device_train_batch_size=hp.batch_size, learning_rate=hp.learning_rate, lr_scheduler_type="linear",
        warmup_steps=0.1, weight_decay=0.0, logging_steps=1, save_strategy="epoch", save_total_limit=1,
        report_to=[], use_cpu=not gpu, bf16=gpu, dataloader_num_workers=0, disable_tqdm=True,
        remove_unused_columns=False, seed=18,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=_collate(tokenizer.pad_token_id),
                      callbacks=[_Log()])
    resume = checkpoints.is_dir() and any(checkpoints.glob("checkpoint-*"))
    started = time.monotonic()
    output = trainer.train(resume_from_checkpoint=True if resume else None)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    check_adapter(out_dir)
    config = model.get_base_model().config
    if base_model.endswith(".gguf") and config.model_type in ARCHITECTURES:
        export_gguf_lora(out_dir, model_type=config.model_type, block_count=config.num_hidden_layers)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return TrainResult(path=out_dir, files=file_hashes(out_dir), steps=output.global_step,
                       loss=losses[-1] if losses else None, tokens=tokens, seconds=time.monotonic() - started)


def check_adapter(folder: Path) -> dict[str, Any]:
    """Read a saved adapter back and check that vLLM can load it: a LoRA `adapter_config.json` with a
    rank of at most `VLLM_MAX_LORA_RANK` and only `VLLM_LORA_MODULES` as targets, and
    `adapter_model.safetensors` holding only `lora_A`/`lora_B` weights of those modules.

    Returns:
        The adapter's config as a dict.

    Raises:
        InvalidRequestError: a file is missing or breaks one of the rules (named with the value).
    """
    for name in ADAPTER_FILES:
        if not (folder / name).is_file():
            raise InvalidRequestError(f"adapter folder {folder} lacks {name}")
    config = json.loads((folder / "adapter_config.json").read_text())
    if config.get("peft_type") != "LORA":
        raise InvalidRequestError(f"adapter {folder} is {config.get('peft_type')!r}, not LORA")
    if not 1 <= int(config.get("r", 0)) <= VLLM_MAX_LORA_RANK:
        raise InvalidRequestError(f"adapter {folder} has rank {config.get('r')}; vLLM accepts 1..{VLLM_MAX_LORA_RANK}")
    targets = set(config.get("target_modules") or [])
    if not targets or targets - set(VLLM_LORA_MODULES):
        raise InvalidRequestError(f"adapter {folder} targets {sorted(targets)}; vLLM loads only {VLLM_LORA_MODULES}")
    if config.get("modules_to_save"):
        raise InvalidRequestError(f"adapter {folder} saves whole modules {config['modules_to_save']}; vLLM loads LoRA weights only")
    with safe_open(str(folder / "adapter_model.safetensors"), framework="pt") as f:
        for key in f.keys():
            module = key.split(".lora_")[0].rsplit(".", 1)[-1]
            if ".lora_A." not in key and ".lora_B." not in key or module not in targets:
                raise InvalidRequestError(f"adapter {folder} holds tensor {key!r}, which is no LoRA weight of {sorted(targets)}")
    return config


def check_adapter_for_profile(folder: Path, profile: dict[str, Any]) -> None:
    """Check that the adapter in `folder` fits the model a vLLM profile serves (deploy/vllm/*.yaml read
    as a dict): trained on that model's bf16 weights (`base_model_name_or_path` is their repository, a
    folder of that name, or their Hugging Face cache folder), with a rank and target modules vLLM loads
    under the profile (`enable-lora`, `max-lora-rank`).

    Raises:
        InvalidRequestError: the adapter's base or modules do not fit (both named).
        ConfigError: no bf16 weights are known for the profile's model.
    """
    config = check_adapter(folder)
    weights = training_weights(profile["model"])
    base = str(config.get("base_model_name_or_path") or "")
    fits = base == weights or Path(base).name == weights.rsplit("/", 1)[-1] or f"models--{weights.replace('/', '--')}" in base
    if not fits:
        raise InvalidRequestError(f"adapter {folder} was trained on {base!r}; the profile serves {profile['model']!r}, "
                                  f"whose adapters are trained on {weights!r}")
    if not profile.get("enable-lora") or int(config["r"]) > int(profile.get("max-lora-rank", 16)):
        raise InvalidRequestError(f"the profile serving {profile['model']!r} does not load a LoRA of rank {config['r']}")
