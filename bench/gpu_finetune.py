"""Issue 18 figures on one GPU (made for an H200; runs on any CUDA card with ~40 GB free): LoRA training
throughput and peak memory of a 7B-class model, and the default embedder's throughput.

- LoRA: Qwen2.5-7B's architecture (28 layers, hidden 3584, GQA 28/4 heads, MLP 18944, vocabulary
  152,064) built from its config with random weights in bf16 (no download: the speed and memory of
  training do not depend on the weights' values), peft LoRA r=16 on q/k/v/o/gate/up/down (the modules
  vLLM loads), gradient checkpointing, AdamW, batches of `--batch` x `--seq` tokens. tokens/s counts
  every token of a batch over the timed steps (after `--warmup` steps); peak memory is
  `torch.cuda.max_memory_allocated`.
- Embedder: the product's default (`ASSISTANT_EMBEDDING_MODEL`'s default, multilingual-e5-small int8 on
  ONNX Runtime) on ~250-token passages, passages/s; and the same architecture in torch on the GPU
  (random weights, bf16) as the production option of a GPU embedder.

The production pair (deploy/vllm/h100.yaml, h200.yaml; finetune/config.py TRAINING_WEIGHTS): vLLM serves
"Qwen/Qwen3-32B-FP8" with LoRA; adapters are trained on its bf16 weights, "Qwen/Qwen3-32B" . The 7B-class
figures here size that training on one card; the pair is printed with them.

Finishes in under 5 minutes on an H200. Usage: python bench/gpu_finetune.py [--steps 12] [--batch 4] [--seq 1024]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QWEN25_7B = dict(
    vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
    num_key_value_heads=4, max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=False,
)
SERVED_FP8, TRAINING_BF16 = "Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B"  # finetune/config.py TRAINING_WEIGHTS
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def lora_figures(steps: int, warmup: int, batch: int, seq: int, rank: int) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    started = time.perf_counter()
    config = Qwen2Config(**QWEN25_7B)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    build_s = time.perf_counter() - started
    params = sum(p.numel() for p in model.parameters())
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=TARGETS, lora_dropout=0.0,
                                             task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    timed = 0.0
    for step in range(warmup + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= warmup:
            timed += time.perf_counter() - t0
    return {
        "params_b": params / 1e9, "trainable_m": trainable / 1e6, "build_s": build_s,
        "tokens_per_s": steps * batch * seq / timed, "step_s": timed / steps,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "loss": float(loss),
    }


def embedder_figures(n: int) -> dict:
    import torch
    from transformers import BertConfig, BertModel

    from assistant.core.embedding.embedder import Embedder
    from assistant.core.settings import Settings

    passage = ("The VPN client must be updated before the first of each month; the IT desk publishes the "
               "installer on the portal and answers questions about certificates and two-factor codes. ") * 6
    texts = [f"{i} {passage}" for i in range(n)]
    model = Settings(_env_file=None).embedding.model
    # Converted once (about 30 s) into a folder of its own, as `Resources.embedder` does under data_dir.
    embedder = Embedder(model, cache_dir=Path(tempfile.mkdtemp(prefix="gpu-finetune-")))
    embedder.embed_passages(texts[:16])
    t0 = time.perf_counter()
    embedder.embed_passages(texts)
    onnx_rate = n / (time.perf_counter() - t0)
    # multilingual-e5-small's architecture on the GPU (12 layers, hidden 384, XLM-R vocabulary).
    config = BertConfig(vocab_size=250037, hidden_size=384, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=1536, max_position_embeddings=514)
    with torch.device("cuda"):
        bert = BertModel(config).to(torch.bfloat16).eval()
    ids = torch.randint(0, config.vocab_size, (64, 256), device="cuda")
    with torch.no_grad():
        bert(input_ids=ids)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        rounds = 20
        for _ in range(rounds):
            bert(input_ids=ids).last_hidden_state.mean(1)
        torch.cuda.synchronize()
    return {"model": model, "cpu_threads": os.cpu_count(), "onnx_passages_per_s": onnx_rate,
            "gpu_bf16_passages_per_s": rounds * 64 / (time.perf_counter() - t0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--passages", type=int, default=256)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this script measures GPU figures")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"production pair: vLLM serves {SERVED_FP8} with LoRA; adapters train on its bf16 weights {TRAINING_BF16}")
    lora = lora_figures(args.steps, args.warmup, args.batch, args.seq, args.rank)
    print(f"| LoRA r={args.rank}, Qwen2.5-7B architecture, bf16, batch {args.batch}x{args.seq} | "
          f"{lora['params_b']:.2f} B params, {lora['trainable_m']:.1f} M trainable | {lora['tokens_per_s']:,.0f} tokens/s | "
          f"{lora['step_s']:.2f} s/step | peak {lora['peak_gib']:.1f} GiB | built in {lora['build_s']:.0f} s |")
    emb = embedder_figures(args.passages)
    print(f"| embedder {emb['model']} | ONNX Runtime int8 on {emb['cpu_threads']} CPU threads: "
          f"{emb['onnx_passages_per_s']:.1f} passages/s | same architecture bf16 on the GPU: "
          f"{emb['gpu_bf16_passages_per_s']:,.0f} passages/s (256 tokens) |")


if __name__ == "__main__":
    main()
