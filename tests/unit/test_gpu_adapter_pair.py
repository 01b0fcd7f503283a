"""The GPU path's pair (issue 39): vLLM serves the FP8 model of deploy/vllm/h100.yaml and h200.yaml with
LoRA; an adapter is published only when trained on that model's bf16 weights with modules vLLM loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.numpy import save_file

from assistant.cli.serve_model import load_profile
from assistant.core.errors import InvalidRequestError
from finetune.config import VLLM_LORA_MODULES, training_weights
from finetune.train import check_adapter_for_profile

REPO = Path(__file__).resolve().parents[2]


def _adapter(folder: Path, *, base: str, modules: list[str], rank: int = 8) -> Path:
    import numpy as np

    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "target_modules": modules,
        "base_model_name_or_path": base}))
    save_file({f"base_model.model.model.layers.0.self_attn.{m}.lora_{x}.weight": np.zeros((rank, rank), np.float32)
               for m in modules for x in "AB"}, str(folder / "adapter_model.safetensors"))
    return folder


@pytest.mark.parametrize("name", ["h100", "h200"])
def test_the_published_adapter_must_be_trained_on_the_served_models_bf16_weights(name, tmp_path):
    profile = load_profile(name)
    weights = training_weights(profile["model"])
    assert profile["model"] == weights + "-FP8"  # the pair: FP8 served, bf16 trained
    for base in (weights, f"/models/{weights.split('/')[1]}", f"/hf/models--{weights.replace('/', '--')}/snapshots/abc"):
        check_adapter_for_profile(_adapter(tmp_path / base.replace("/", "_"), base=base, modules=list(VLLM_LORA_MODULES)),
                                  profile)
    with pytest.raises(InvalidRequestError, match=r"Qwen2\.5-Coder-0\.5B.*Qwen3-32B"):
        check_adapter_for_profile(_adapter(tmp_path / "small", base="Qwen/Qwen2.5-Coder-0.5B-Instruct",
                                           modules=["q_proj"]), profile)
    with pytest.raises(InvalidRequestError, match="lm_head"):
        check_adapter_for_profile(_adapter(tmp_path / "head", base=weights, modules=["q_proj", "lm_head"]), profile)


def test_the_docs_and_the_gpu_bench_name_the_pair():
    for path in ("docs/finetune.md", "bench/gpu_finetune.py", "deploy/vllm/h100.yaml", "deploy/vllm/h200.yaml"):
        text = (REPO / path).read_text()
        assert "Qwen/Qwen3-32B-FP8" in text and "Qwen/Qwen3-32B " in text.replace("`", " ").replace('"', " "), path
