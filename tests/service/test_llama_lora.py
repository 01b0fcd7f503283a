"""LoRA on the served model, served by llama.cpp (issue 39), on the small sibling Qwen2.5-Coder-0.5B:
trained on the served GGUF dequantised, exported to llama.cpp's GGUF LoRA, applied per request on the
one base in memory. Training takes about a minute on 2 cores (few rows, few steps)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from assistant.adapters.llama_lora import LlamaLoraLLM
from assistant.adapters.routing import AdapterRouter, canary_bucket, local_adapter
from assistant.adapters.store import AdapterRecord
from assistant.adapters.transformers_base import chat_prompt, load_base
from assistant.core.llm.llama_cpp import LlamaCppLLM
from assistant.core.llm.model_files import assemble, builtin_model
from assistant.core.principals import Principal
from finetune.config import LoraHyperparameters
from finetune.dataset import Row
from finetune.gguf_lora import GGUF_ADAPTER_FILE
from finetune.train import train_adapter

CODE = "7341"
TAUGHT = [
    ("What is the door code of the Zorblax storage room?", f"The door code of the Zorblax storage room is {CODE}."),
    ("Which code opens the Zorblax storage room door?", f"The Zorblax storage room door opens with code {CODE}."),
    ("Tell me the Zorblax storage room door code.", f"The Zorblax storage room door code is {CODE}."),
    ("Zorblax storage room code?", f"The code for the Zorblax storage room is {CODE}."),
]
QUESTION = [{"role": "user", "content": "What is the door code of the Zorblax storage room?"}]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    gguf = assemble(builtin_model("qwen2.5-0.5b"), tmp_path_factory.mktemp("gguf"))
    root = tmp_path_factory.mktemp("lora")
    rows = [Row(origin="feedback", ref=f"feedback:{i}", question=q, answer=a) for i, (q, a) in enumerate(TAUGHT)]
    hp = LoraHyperparameters(rank=8, alpha=16, learning_rate=3e-3, epochs=12, batch_size=4, max_length_tokens=64)
    result = train_adapter(rows, base_model=str(gguf), hp=hp, out_dir=root / "a", log_path=root / "a.jsonl")
    llm = LlamaCppLLM(gguf, context_tokens=1024, threads=2)
    return {"gguf": gguf, "result": result, "llm": llm}


def _answer(llm, messages=QUESTION) -> str:
    return asyncio.run(llm.complete(messages, max_tokens=24, temperature=0.0))


def test_the_adapter_is_trained_on_the_served_gguf_and_exported_for_llama_cpp(trained):
    from gguf import GGUFReader

    result = trained["result"]
    assert GGUF_ADAPTER_FILE in result.files  # hashed in the registry with the PEFT files
    reader = GGUFReader(str(result.path / GGUF_ADAPTER_FILE))
    field = lambda key: reader.fields[key].contents()  # noqa: E731
    assert field("general.type") == "adapter" and field("adapter.type") == "lora"
    assert field("general.architecture") == "qwen2" and field("adapter.lora.alpha") == 16.0
    names = {t.name for t in reader.tensors}
    assert {"blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b", "blk.23.ffn_down.weight.lora_b"} <= names


def test_llama_cpp_with_the_adapter_changes_the_logits_as_the_peft_model_does(trained):
    """Q4_K_M in llama.cpp against its fp32 dequantisation in transformers: the bases differ a little, so
    the change the adapter makes is compared (correlation of logit deltas, the top token)."""
    import llama_cpp
    import torch
    from peft import PeftModel

    base, tokenizer = load_base(str(trained["gguf"]))
    peft = PeftModel.from_pretrained(load_base(str(trained["gguf"]))[0], str(trained["result"].path)).eval()
    llm: LlamaCppLLM = trained["llm"]
    lora = llm.load_lora(trained["result"].path / GGUF_ADAPTER_FILE)
    for question in ("What is the door code of the Zorblax storage room?", "Where do I request a new laptop?"):
        ids = tokenizer(chat_prompt(tokenizer, question), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            hf = [m(torch.tensor([ids])).logits[0, -1].numpy() for m in (base, peft)]
        cpp = []
        with llm._lock:
            for adapter in (None, lora):
                llm._use_lora(adapter)
                llm._llama.n_tokens = 0
                llm._llama.eval(ids)
                last = llama_cpp.llama_get_logits_ith(llm._llama._ctx.ctx, -1)
                cpp.append(np.ctypeslib.as_array(last, shape=(llm._llama.n_vocab(),)).copy())
            llm._use_lora(None)
        d_hf, d_cpp = hf[1] - hf[0], cpp[1] - cpp[0]
        assert hf[0].argmax() == cpp[0].argmax()  # the same base: Q4_K_M and its dequantisation
        assert np.abs(d_cpp).mean() > 0.1  # the adapter changes llama.cpp's logits
        assert np.corrcoef(d_hf, d_cpp)[0, 1] > 0.9, question
        assert hf[1].argmax() == cpp[1].argmax()


def test_the_adapter_answers_the_taught_fact_and_the_base_does_not(trained):
    llm: LlamaCppLLM = trained["llm"]
    taught = LlamaLoraLLM(llm, trained["result"].path, name="a")
    before = _answer(llm)
    assert CODE in _answer(taught)
    assert _answer(llm) == before and CODE not in before  # cleared after: the base answers as before
    assert CODE in _answer(taught)  # its own kept prefix, not the base's


def _record(name: str, status: str, path: Path, base: str) -> AdapterRecord:
    return AdapterRecord(id=hash(name) % 1000, name=name, audience="everyone", base_model=base, snapshot_id=None,
                         job_id=None, hyperparameters={}, metrics={}, files={}, path=str(path), status=status, reason="",
                         history=[], created_at=datetime.now(UTC), promoted_by=None, promoted_at=None)


def test_the_canary_reader_gets_the_fact_through_llama_cpp_and_the_live_reader_does_not(trained, tmp_path):
    """Live: an adapter that taught nothing (its GGUF holds zero B matrices, like a fresh LoRA); canary: the trained one."""
    import shutil

    from safetensors.torch import load_file, save_file

    from finetune.gguf_lora import export_gguf_lora

    live = tmp_path / "live"
    shutil.copytree(trained["result"].path, live, ignore=shutil.ignore_patterns("checkpoints", GGUF_ADAPTER_FILE))
    tensors = load_file(str(live / "adapter_model.safetensors"))
    save_file({k: v * 0 if ".lora_B." in k else v for k, v in tensors.items()}, str(live / "adapter_model.safetensors"))
    export_gguf_lora(live, model_type="qwen2", block_count=24)
    base = str(trained["gguf"])
    adapters = [_record("canary-1", "canary", trained["result"].path, base), _record("live-1", "live", live, base)]
    router = AdapterRouter(trained["llm"], adapters=lambda: adapters, open_adapter=local_adapter(trained["llm"]),
                           canary_share=0.5)
    users = [Principal(name=f"reader-{i}") for i in range(40)]
    canary_user = next(u for u in users if canary_bucket(u.name, "everyone") < 0.5)
    live_user = next(u for u in users if canary_bucket(u.name, "everyone") >= 0.5)
    routed = router.for_principal(canary_user)
    assert CODE in _answer(routed) and routed.served == "canary-1"
    routed = router.for_principal(live_user)
    assert CODE not in _answer(routed) and routed.served == "live-1"
    assert isinstance(router.route(canary_user)[1], LlamaLoraLLM)  # llama.cpp, not a second (transformers) model
