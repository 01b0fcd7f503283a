"""A base chat model in transformers for LoRA training: a GGUF dequantised (the one llama.cpp serves, read
through transformers' GGUF loader), or a local transformers folder (production: the bf16 weights of the
model vLLM serves). Heavy imports (torch, transformers) happen on first use only."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from assistant.core.errors import ConfigError
from assistant.core.llm.model_files import smollm2_gguf_path

BUILTIN_SMOLLM2 = "builtin:smollm2-135m"
_cache: dict[str, tuple[Any, dict[str, Any], Any]] = {}  # base -> (config, state dict, tokenizer)
_lock = threading.Lock()


def _load(base_model: str) -> tuple[Any, dict[str, Any], Any]:
    import torch  # noqa: PLC0415 - torch: ~4 s, only when a base model loads
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415 - transformers: ~2 s, only when a base model loads

    if base_model == BUILTIN_SMOLLM2 or base_model.endswith(".gguf"):
        gguf = smollm2_gguf_path() if base_model == BUILTIN_SMOLLM2 else Path(base_model)
        if not gguf.is_file():
            raise ConfigError(f"the adapters' base {base_model!r} is no GGUF file")
        kwargs = {"gguf_file": gguf.name}
        folder = str(gguf.parent)
    else:
        if not Path(base_model).is_dir():
            raise ConfigError(
                f"ASSISTANT_FINETUNE_BASE_MODEL={base_model!r} is neither {BUILTIN_SMOLLM2!r}, a GGUF file nor a local "
                "transformers folder"
            )
        kwargs, folder = {}, base_model
    tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kwargs)
    config = model.config
    # The dequantised weights are plain float tensors; the GGUF's quantisation note would make
    # transformers treat the rebuilt model as quantised.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The loaded model's own tensors (not clones: half the peak memory); `load_base` copies them into each
    # fresh model, so they are never changed.
    return config, {k: v.detach() for k, v in model.state_dict().items()}, tokenizer


def load_base(base_model: str, *, dtype: str = "float32") -> tuple[Any, Any]:
    """A fresh copy of the base model (its own modules, so that peft may wrap it) and its tokenizer.

    The weights are read once per process (about 20 s for SmolLM2's GGUF on 2 cores) and copied for
    each call (about 1 s for 135M parameters).

    Args:
        base_model: a GGUF file (dequantised: `qwen2` and `llama` architectures), `builtin:smollm2-135m`
            or a local transformers folder.
        dtype: `float32` (CPU) or `bfloat16` (GPU).

    Returns:
        `(model, tokenizer)`: a `transformers` causal LM in eval mode and its tokenizer (pad token set).

    Raises:
        ConfigError: `base_model` names neither.
    """
    import torch  # noqa: PLC0415 - torch: ~4 s, only when a base model loads
    from transformers import AutoModelForCausalLM  # noqa: PLC0415 - transformers: ~2 s, only when a base model loads

    with _lock:
        if base_model not in _cache:
            _cache[base_model] = _load(base_model)
        config, state, tokenizer = _cache[base_model]
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    model.eval()
    return model, tokenizer


def chat_prompt(tokenizer: Any, question: str) -> str:
    """The model's chat template applied to one user turn, ready for the assistant's answer."""
    return tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True)
