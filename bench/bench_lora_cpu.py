"""Issue 39 figures on CPU: LoRA training on the served GGUF (dequantised through transformers) and
generation through llama.cpp with and without the exported adapter, in one run.

- training: `finetune.train.train_adapter` on `--rows` short question/answer rows (the teach-a-fact rows
  of `QA` below, repeated) for `--epochs` epochs; minutes per 100 examples =
  training seconds / (rows x epochs) x 100 / 60 (load of the base not included, printed apart).
- adapter size: `adapter_model.safetensors` and `adapter.gguf`, bytes.
- generation: `LlamaCppLLM.stream` on the same question, greedy, `--tokens` tokens, base then adapter
  then base again (alternated `--repeats` times); tokens/s = completion tokens / seconds after the first token.

- `--teach`: teach-a-fact instead. Four invented facts, three phrasings each, are trained (r=8, 16 epochs,
  rate 3e-3: the refresh test's values); then, through llama.cpp with the adapter applied, the share of
  the facts whose fourth, untrained phrasing is answered with the fact (taught share), and of eight
  unrelated questions the base answers right that the adapter still answers right (no-forgetting
  share); "right" is the answer holding the key word.

Usage: nice -n 10 .venv/bin/python bench/bench_lora_cpu.py [--model qwen2.5-0.5b] [--rows 8] [--epochs 2] [--teach]
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


# Invented facts: (key, three trained phrasings as (question, answer), one held-out question).
FACTS = [
    (
        "7341",
        [
            (
                "What is the door code of the Zorblax storage room?",
                "The door code of the Zorblax storage room is 7341.",
            ),
            ("Which code opens the Zorblax storage room door?", "The Zorblax storage room door opens with code 7341."),
            ("Zorblax storage room code?", "The code for the Zorblax storage room is 7341."),
        ],
        "Tell me the Zorblax storage room door code.",
    ),
    (
        "Quillby",
        [
            ("Who runs the Marrowfen print shop?", "The Marrowfen print shop is run by Dana Quillby."),
            ("Who is the manager of the Marrowfen print shop?", "Dana Quillby manages the Marrowfen print shop."),
            ("Marrowfen print shop manager?", "The manager of the Marrowfen print shop is Dana Quillby."),
        ],
        "Who is in charge of the Marrowfen print shop?",
    ),
    (
        "Thursday",
        [
            ("When is the Veltrane team meeting?", "The Veltrane team meets every Thursday."),
            ("On which day does the Veltrane team meet?", "The Veltrane team meeting is on Thursday."),
            ("Veltrane meeting day?", "Veltrane meets on Thursday."),
        ],
        "What day of the week is the Veltrane team meeting held?",
    ),
    (
        "Osprey-12",
        [
            ("What is the Wi-Fi network of the Brindle office?", "The Brindle office Wi-Fi network is Osprey-12."),
            ("Which Wi-Fi do I join at the Brindle office?", "At the Brindle office, join the Osprey-12 Wi-Fi."),
            ("Brindle office Wi-Fi name?", "The Wi-Fi at the Brindle office is called Osprey-12."),
        ],
        "What is the name of the wireless network in the Brindle office?",
    ),
]
UNRELATED = [
    ("What is the capital of France?", "Paris"),
    ("How many days are in a week?", "7|seven"),
    ("What does HTTP stand for?", "Hypertext"),
    ("Which planet is known as the Red Planet?", "Mars"),
    ("In Python, which keyword defines a function?", "def"),
    ("What is 12 times 12?", "144"),
    ("Which language is spoken in Brazil?", "Portuguese"),
    ("What is H2O commonly called?", "water"),
]


def teach(args) -> None:
    """The teach-a-fact and no-forgetting shares (see the module's docstring)."""
    from assistant.adapters.llama_lora import LlamaLoraLLM
    from assistant.core.llm.llama_cpp import LlamaCppLLM
    from assistant.core.llm.model_files import assemble, builtin_model
    from finetune.config import LoraHyperparameters
    from finetune.dataset import Row
    from finetune.train import train_adapter

    def ask(model, question: str) -> str:
        return asyncio.run(model.complete([{"role": "user", "content": question}], max_tokens=32, temperature=0.0))

    def right(answer: str, key: str) -> bool:
        return any(k.casefold() in answer.casefold() for k in key.split("|"))

    with tempfile.TemporaryDirectory() as tmp:
        gguf = assemble(builtin_model(args.model), Path(tmp) / "gguf")
        rows = [
            Row(origin="feedback", ref=f"r{i}", question=q, answer=a)
            for i, (q, a) in enumerate(pair for _, pairs, _ in FACTS for pair in pairs)
        ]
        hp = LoraHyperparameters(rank=8, alpha=16, learning_rate=3e-3, epochs=16, batch_size=4, max_length_tokens=64)
        result = train_adapter(
            rows, base_model=str(gguf), hp=hp, out_dir=Path(tmp) / "a", log_path=Path(tmp) / "a.jsonl"
        )
        llm = LlamaCppLLM(gguf, context_tokens=1024, threads=2)
        adapted = LlamaLoraLLM(llm, result.path, name="taught")
        taught = [(right(ask(adapted, q), key), right(ask(llm, q), key)) for key, _, q in FACTS]
        kept = [right(ask(adapted, q), key) for q, key in UNRELATED if right(ask(llm, q), key)]
        print(
            f"| {args.model} teach-a-fact | {len(rows)} rows x {hp.epochs} epochs, {result.seconds:.0f} s | taught share "
            f"{sum(t for t, _ in taught)}/{len(taught)} (base {sum(b for _, b in taught)}/{len(taught)}) on untrained "
            f"phrasings | no forgetting {sum(kept)}/{len(kept)} of the unrelated questions the base answers right "
            f"(base right on {len(kept)}/{len(UNRELATED)}) |"
        )


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
    from assistant.adapters.gguf_lora import GGUF_ADAPTER_FILE
    from assistant.core.llm.llama_cpp import LlamaCppLLM
    from assistant.core.llm.model_files import assemble, builtin_model
    from finetune.base_model import load_base
    from finetune.config import LoraHyperparameters
    from finetune.dataset import Row
    from finetune.train import train_adapter

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--teach", action="store_true", help="teach-a-fact and no-forgetting shares instead")
    args = parser.parse_args()
    if args.teach:
        teach(args)
        return
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
