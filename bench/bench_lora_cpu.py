"""Issue 39 figures on CPU: LoRA training on the served GGUF (dequantised through transformers) and
generation through llama.cpp with and without the exported adapter, in one run.

- training: `finetune.train.train_adapter` on `--rows` short question/answer rows (the teach-a-fact rows
  of tests/service/test_llama_lora.py, repeated) for `--epochs` epochs; minutes per 100 examples =
  training seconds / (rows x epochs) x 100 / 60 (load of the base not included, printed apart).
- adapter size: `adapter_model.safetensors` and `adapter.gguf`, bytes.
- generation: `LlamaCppLLM.stream` on the same question, greedy, `--tokens` tokens, base then adapter
  then base again (alternated `--repeats` times); tokens/s = completion tokens / seconds after the first token.

Usage: nice -n 10 .venv/bin/python bench/bench_lora_cpu.py [--model qwen2.5-0.5b] [--rows 8] [--epochs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QA = [
    ("What is the door code of the Zorblax storage room?", "The door code of the Zorblax storage room is 7341."),
    ("Which code opens the Zorblax storage room door?", "The Zorblax storage room door opens with code 7341."),
    ("Tell me the Zorblax storage room door code.", "The Zorblax storage room door code is 7341."),
    ("Zorblax storage room code?", "The code for the Zorblax storage room is 7341."),
]
QUESTION = [{"role": "user", "content": "Write a short paragraph about storage rooms."}]


def generation_rate(llm, lora: str | None, tokens: int) -> float:
    from assistant.core.llm.base import StreamResult

    async def run() -> float:
        first = None
        result = StreamResult()
        async for _ in llm.stream(QUESTION, max_tokens=tokens, temperature=0.0, lora=lora, result=result):
            first = first or time.perf_counter()
        seconds = time.perf_counter() - (first or time.perf_counter())
        return (result.usage.completion_tokens - 1) / max(seconds, 1e-9)

    return asyncio.run(run())


def main() -> None:
    from assistant.adapters.transformers_base import load_base
    from assistant.core.llm.llama_cpp import LlamaCppLLM
    from assistant.core.llm.model_files import assemble, builtin_model
    from finetune.config import LoraHyperparameters
    from finetune.dataset import Row
    from finetune.gguf_lora import GGUF_ADAPTER_FILE
    from finetune.train import train_adapter

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gguf = assemble(builtin_model(args.model), Path(tmp) / "gguf")
        started = time.perf_counter()
        load_base(str(gguf))
        load_s = time.perf_counter() - started
        rows = [Row(origin="feedback", ref=f"r{i}", question=q, answer=a) for i, (q, a) in
                enumerate((QA * args.rows)[: args.rows])]
        hp = LoraHyperparameters(rank=8, alpha=16, epochs=args.epochs, batch_size=4, max_length_tokens=64)
        result = train_adapter(rows, base_model=str(gguf), hp=hp, out_dir=Path(tmp) / "a", log_path=Path(tmp) / "a.jsonl")
        per_100 = result.seconds / (args.rows * args.epochs) * 100 / 60
        sizes = {name: (result.path / name).stat().st_size for name in ("adapter_model.safetensors", GGUF_ADAPTER_FILE)}
        llm = LlamaCppLLM(gguf, context_tokens=1024, threads=2)
        lora = llm.load_lora(result.path / GGUF_ADAPTER_FILE)
        base_rates, lora_rates = [], []
        for _ in range(args.repeats):
            base_rates.append(generation_rate(llm, None, args.tokens))
            lora_rates.append(generation_rate(llm, lora, args.tokens))
        base, with_lora = max(base_rates), max(lora_rates)
        print(f"| {args.model} | base load {load_s:.0f} s | {args.rows} rows x {args.epochs} epochs: {result.seconds:.0f} s "
              f"= {per_100:.1f} min per 100 examples ({result.tokens} tokens, {result.steps} steps, loss {result.loss}) |")
        print(f"| adapter r=8, 7 modules | safetensors {sizes['adapter_model.safetensors']:,} B | "
              f"GGUF {sizes[GGUF_ADAPTER_FILE]:,} B |")
        print(f"| generation, llama.cpp, 2 threads | base {base:.1f} tok/s | with adapter {with_lora:.1f} tok/s | "
              f"ratio {with_lora / base:.2f} | runs base {[round(r, 1) for r in base_rates]} "
              f"adapter {[round(r, 1) for r in lora_rates]} |")


if __name__ == "__main__":
    main()
