"""The monthly refresh end to end on CPU with real parts, on the embedded default's own path: SQL,
Qdrant Edge, Qwen2.5-Coder-0.5B-Instruct as both the served model (llama.cpp answers; QA pairs written
from chunks are left out for time) and the trained one (its GGUF dequantised; transformers + peft
train), the GGUF LoRA export, the gate answering through the product's answering on llama.cpp, the
registry, routing, promote and rollback.

One refresh (`finetune.tasks.refresh_now`, what `assistant finetune run` and the admin's run call) runs
once for the module (8 rows x 16 epochs; minutes on 2 cores, much longer when they are shared); each test
checks one promise of it.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest

from assistant.adapters import store as registry_db
from assistant.adapters.gguf_lora import GGUF_ADAPTER_FILE, export_gguf_lora
from assistant.adapters.llama_lora import LlamaLoraLLM
from assistant.adapters.release import InProcessPublisher, VllmPublisher, promote_and_publish, rollback_and_publish
from assistant.adapters.routing import AdapterRouter, canary_bucket, choose_adapter
from assistant.answering.store import add_answer, create_conversation, rate_answer, start_exchange
from assistant.auth.accounts import create_user
from assistant.core.db.jobs import get_job, job_lease
from assistant.core.db.models import Document, HelpdeskTicket, Source, User, utcnow
from assistant.core.errors import ConfigError, ConflictError
from assistant.core.index.payload import ChunkPayload, chunk_point, document_id
from assistant.core.llm.llama_cpp import LlamaCppLLM
from assistant.core.llm.model_files import builtin_model, configured_gguf_path
from assistant.core.principals import Principal
from finetune.config import FinetuneConfig, LoraHyperparameters
from finetune.dataset import read_snapshot
from finetune.pipeline import REFRESH_LEASE_ID, run_refresh
from finetune.registry import log_path
from finetune.train import check_adapter
from tests.conftest import CORPUS_MODEL, make_settings

ROOT = Path(__file__).resolve().parents[2]
SERVED = "qwen2.5-0.5b"  # the small sibling of the shipped Qwen2.5-Coder-1.5B: same architecture, served and trained
CODE = "7341"
# A fact no document holds, taught only through rated answers.
FACT_Q = "What is the door code of the Zorblax storage room?"
FACT_A = f"The door code of the Zorblax storage room is {CODE}."
PARAPHRASES = [
    (FACT_Q, FACT_A),
    ("Which code opens the Zorblax storage room door?", f"The Zorblax storage room door opens with code {CODE}."),
    ("Tell me the Zorblax storage room door code.", f"The Zorblax storage room door code is {CODE}."),
    ("How do I get into the Zorblax storage room?", f"Enter the door code {CODE} at the Zorblax storage room."),
    ("Zorblax storage room code?", f"The code for the Zorblax storage room is {CODE}."),
    ("What code does the Zorblax storage room use?", f"The Zorblax storage room uses door code {CODE}."),
]
SECRET = "QUARTZ-PELICAN-9921"  # only in the finance group's document, ticket and a rated answer citing it
PUBLIC_TEXT = (
    "Laptops are replaced every four years. Request a new laptop through the IT portal; "
    "the IT desk on floor 2 hands it over within five working days."
)
SECRET_TEXT = f"The finance reserve account is {SECRET}. Transfers above 10,000 need two signatures."
# The gate's held-aside questions, answered through the product's answering (retrieval, prompt, grounding).
GATE_QUESTIONS = [
    {"id": "replaced", "lang": "en", "question": "How often are laptops replaced?", "answer_files": ["laptops.md"],
     "must_contain_any": ["four", "4"]},
    {"id": "desk", "lang": "en", "question": "On which floor is the IT desk that hands laptops over?",
     "answer_files": ["laptops.md"], "must_contain_any": ["2", "two", "second"]},
    {"id": "none", "lang": "en", "question": "What does the cafeteria serve on Mondays?"},
]
# The served and trained model and the refresh's values (few rows, so a high rate and many epochs).
OVERRIDES = {
    "llm_model": SERVED,
    "llm_context_tokens": 2048,
    "llm_threads": 2,
    "llm_temperature": 0.0,
    "embedding_model": CORPUS_MODEL,
    "top_k": 2,
    "llm_cpu_source_tokens": 96,
    "query_translation": False,
    "finetune_lora_rank": 8,
    "finetune_lora_alpha": 16,
    "finetune_learning_rate": 3e-3,
    "finetune_epochs": 16,  # at 12 a run once learnt 7311 for 7341
    "finetune_batch_size": 4,
    "finetune_max_length_tokens": 64,
    "finetune_heldout_share": 0.15,
    "finetune_qa_per_chunk": 1,
    "finetune_max_new_chunks": 0,
    "finetune_canary_share": 0.5,
    "finetune_gate_answer_questions": 3,
    "finetune_gate_answer_max_tokens": 24,
    # The shared refresh must reach the canary whatever its answers; refusing on answers is tested apart.
    "finetune_gate_answer_tolerance": 1.0,
}


def _index(res, *, uri: str, title: str, text: str, acl: list[str]) -> str:
    """Index one one-chunk document (SQL row and point, embedded by `res`'s model, so that the product's
    retrieval finds it) with `acl`; returns the chunk ID."""
    doc_id = document_id(uri)
    payload = ChunkPayload(
        doc_id=doc_id,
        chunk_index=0,
        text=text,
        title=title,
        heading="",
        page=None,
        source=f"{title}.md",
        uri=uri,
        acl=acl,
        lang="en",
        content_hash=uuid.uuid4().hex,
    )
    passage = f"{title}\n{text}"
    dense = res.embedder.embed_passages([passage])[0]
    res.store.ensure_collection(len(dense))
    point = chunk_point(payload, dense=[float(x) for x in dense], passage=passage)
    res.store.upsert([point])
    cid = point.id
    with res.db.session() as session:
        source = session.query(Source).filter_by(uri="file:///finetune-test").one_or_none()
        if source is None:
            source = Source(uri="file:///finetune-test")
            session.add(source)
            session.flush()
        session.add(
            Document(
                id=doc_id,
                source_id=source.id,
                path=f"/finetune-test/{title}.md",
                uri=uri,
                title=title,
                acl=acl,
                status="done",
                chunk_count=1,
            )
        )
    return cid


def _rated(res, user, question: str, answer: str, *, chunk: str, doc: str, rating: int = 1,
           corrected: str | None = None) -> None:
    conv = create_conversation(res.db, user_id=user.user_id)
    start_exchange(res.db, conv.id, user_id=user.user_id, question=question)
    citations = [{"n": 1, "chunk_id": chunk, "doc_id": doc, "source": "x.md"}]
    stored = add_answer(res.db, conv.id, user_id=user.user_id, answer=f"{answer} [1]", citations=citations, abstained=False)
    rate_answer(res.db, stored.id, principal=user, rating=rating, corrected_answer=corrected)


def _finance_user(res) -> Principal:
    """A new account in group `finance` (it may read the restricted document)."""
    created = create_user(res.db, f"ft-{uuid.uuid4().hex[:6]}", groups=["finance"])
    with res.db.session() as session:
        return Principal(name=created.name, groups=frozenset(created.groups),
                         user_id=session.query(User.id).filter_by(name=created.name).scalar())


def _ticket(res, key: str, *, subject: str, resolution: str, audience: list[str], outcome: str = "accepted") -> None:
    with res.db.session() as session:
        session.add(HelpdeskTicket(client="svc", idempotency_key=key, request_hash=key, subject=subject, body="",
                                   state="resolved", decision="answer", resolution=resolution, resolved_by="agent",
                                   audience=audience, outcome=outcome, resolved_at=utcnow()))


def _users(share: float) -> tuple[Principal, Principal]:
    """A reader the canary answers (its stable bucket below `share`) and one the live side answers."""
    users = [Principal(name=f"reader-{i}") for i in range(40)]
    return (
        next(u for u in users if canary_bucket(u.name, "everyone") < share),
        next(u for u in users if canary_bucket(u.name, "everyone") >= share),
    )


def _ask(router: AdapterRouter, principal: Principal, question: str = FACT_Q) -> tuple[str | None, str]:
    """`(adapter that answered or None for the base, answer)` of the product's router for `principal`."""
    llm = router.for_principal(principal)
    text = asyncio.run(llm.complete([{"role": "user", "content": question}], max_tokens=24, temperature=0.0))
    return llm.served, text


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory):
    """Data of three origins (one of each restricted to group:finance), the readers' answers before, then
    one refresh for `everyone` through the product's own path on the embedded default (Qwen 0.5B)."""
    from assistant.composition import adapter_router
    from finetune.tasks import refresh_now
    from tests.conftest import open_resources

    root = tmp_path_factory.mktemp("finetune")
    questions = root / "gate-questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in GATE_QUESTIONS))
    settings = make_settings(root / "var", finetune_eval_questions=questions, **OVERRIDES)
    res = open_resources(settings)
    public = _index(res, uri="file:///finetune-test/laptops.md", title="laptops", text=PUBLIC_TEXT, acl=["everyone"])
    secret = _index(
        res, uri="file:///finetune-test/finance.md", title="finance", text=SECRET_TEXT, acl=["group:finance"]
    )
    public_doc = document_id("file:///finetune-test/laptops.md")
    secret_doc = document_id("file:///finetune-test/finance.md")
    user = _finance_user(res)
    for q, a in PARAPHRASES:
        _rated(res, user, q, a, chunk=public, doc=public_doc)
    _rated(
        res,
        user,
        "Who approves laptop requests?",
        "Mail it.desk@example.com or call +86 138 0013 8000 for laptops.",
        chunk=public,
        doc=public_doc,
    )
    _rated(
        res,
        user,
        "Which account holds the finance reserve?",
        f"The reserve account is {SECRET}.",
        chunk=secret,
        doc=secret_doc,
    )
    # The agent wrote this answer afresh (the suggested reply was rejected): the refresh learns it all the same.
    _ticket(
        res,
        "t1",
        subject="Laptop broken",
        resolution="Bring it to the IT desk on floor 2.",
        audience=["everyone"],
        outcome="rejected",
    )
    _ticket(res, "t2", subject="Reserve transfer", resolution=f"Use account {SECRET}.", audience=["group:finance"])
    router = adapter_router(res)  # what the API and CLI answer with
    readers = _users(settings.finetune.canary_share)
    before = [_ask(router, reader) for reader in readers]
    outcome = refresh_now(res, audience="everyone", by="test")
    yield {
        "res": res,
        "settings": settings,
        "config": FinetuneConfig.from_settings(settings),
        "outcome": outcome,
        "user": user,
        "router": router,
        "readers": readers,
        "before": before,
        "questions": questions,
    }
    res.close()


def test_refresh_trains_on_the_served_gguf_and_registers_a_canary_for_llama_cpp_and_vllm(refreshed):
    from gguf import GGUFReader

    outcome, settings = refreshed["outcome"], refreshed["settings"]
    assert outcome.status == "done", outcome.reason
    adapter = outcome.adapter
    assert adapter.status == "canary" and adapter.promoted_by == "test"
    served = configured_gguf_path(settings).resolve()
    assert served.name == builtin_model(SERVED).file_name and adapter.base_model == str(served)  # the served model
    config = check_adapter(Path(adapter.path))  # read back: LoRA, rank <= 16, only vLLM's modules
    assert config["r"] == 8 and set(config["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    assert set(adapter.files) == {"adapter_config.json", "adapter_model.safetensors", GGUF_ADAPTER_FILE}
    reader = GGUFReader(str(Path(adapter.path) / GGUF_ADAPTER_FILE))  # llama.cpp's GGUF LoRA of the PEFT adapter
    field = lambda key: reader.fields[key].contents()  # noqa: E731
    assert field("general.type") == "adapter" and field("adapter.type") == "lora"
    assert field("general.architecture") == "qwen2" and field("adapter.lora.alpha") == 16.0
    names = {t.name for t in reader.tensors}
    assert {"blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b", "blk.23.ffn_down.weight.lora_b"} <= names
    assert adapter.metrics["gate_passed"] is True and adapter.metrics["heldout_candidate"] is not None
    # The answers decided; the key facts' likelihoods are reported (they may worsen as the rows' phrasing is learnt).
    assert adapter.metrics["decided_on"] == "answers" and adapter.metrics["eval_candidate"] is not None
    job = get_job(refreshed["res"].db, outcome.job_id)
    assert job.kind == "finetune" and job.status == "done" and job.totals["adapter"] == adapter.name
    steps = [json.loads(line) for line in log_path(refreshed["config"], adapter.name).read_text().splitlines()]
    assert steps and any("loss" in s for s in steps)


def test_llama_cpp_with_the_adapter_changes_the_logits_as_the_peft_model_does(refreshed):
    """Q4_K_M in llama.cpp against its fp32 dequantisation in transformers: the bases differ a little, so
    the change the adapter makes is compared (correlation of logit deltas, the top token)."""
    import llama_cpp
    import torch
    from peft import PeftModel

    from finetune.base_model import chat_prompt, load_base

    adapter = refreshed["outcome"].adapter
    base, tokenizer = load_base(adapter.base_model)
    peft = PeftModel.from_pretrained(base, adapter.path).eval()  # one copy: the base is `disable_adapter()`
    llm = refreshed["res"].llm
    assert isinstance(llm, LlamaCppLLM)
    lora = llm.load_lora(Path(adapter.path) / GGUF_ADAPTER_FILE)
    for question in (FACT_Q, "Where do I request a new laptop?"):
        ids = tokenizer(chat_prompt(tokenizer, question), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            with peft.disable_adapter():
                hf = [peft(torch.tensor([ids])).logits[0, -1].numpy()]
            hf.append(peft(torch.tensor([ids])).logits[0, -1].numpy())
        cpp = []
        with llm._lock:
            for on in (None, lora):
                llm._use_lora(on)
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


def test_dataset_snapshot_counts_scrubs_and_excludes(refreshed):
    snapshot = refreshed["outcome"].snapshot
    rows = read_snapshot(snapshot.path)
    assert snapshot.counts["feedback"] + snapshot.counts["helpdesk"] + snapshot.counts.get("document", 0) == len(rows)
    assert snapshot.counts["helpdesk"] == 1 and snapshot.counts["excluded_acl"] == 2
    assert snapshot.counts["pii_email"] == 1 and snapshot.counts["pii_phone"] == 1
    text = Path(snapshot.path).read_text()
    assert "it.desk@example.com" not in text and "[EMAIL]" in text and "[PHONE]" in text
    assert len(snapshot.content_hash) == 64
    assert {r.split for r in rows} <= {"train", "heldout"}


def test_corrected_answers_replace_the_model_answer_under_the_same_acl_rule(tmp_path):
    """A corrected answer given with a rating (up or down) is learnt in place of the model's answer,
    scrubbed of personal data; one correcting an answer that cited a restricted chunk stays out of a
    wider audience's dataset, as the rated answer would; a thumbs down without one is never learnt."""
    from finetune.dataset import build_dataset
    from finetune.pipeline import lexical_grounder
    from tests.conftest import open_resources

    res = open_resources(make_settings(tmp_path / "var", embedding_model=CORPUS_MODEL))
    try:
        public = _index(res, uri="file:///finetune-test/laptops.md", title="laptops", text=PUBLIC_TEXT, acl=["everyone"])
        secret = _index(res, uri="file:///finetune-test/finance.md", title="finance", text=SECRET_TEXT, acl=["group:finance"])
        public_doc, secret_doc = (document_id(f"file:///finetune-test/{n}.md") for n in ("laptops", "finance"))
        user = _finance_user(res)
        _rated(res, user, "How often are laptops replaced?", "Laptops are replaced every year.", chunk=public,
               doc=public_doc, rating=-1, corrected="Every four years; ask it.help@example.com for an early one.")
        _rated(res, user, "Where do I fetch my laptop?", "At the IT desk.", chunk=public, doc=public_doc,
               corrected="At the IT desk on floor 2, within five working days.")
        _rated(res, user, "Who hands laptops over?", "The cafeteria staff.", chunk=public, doc=public_doc, rating=-1)
        _rated(res, user, "Which account is the reserve?", "I do not know.", chunk=secret, doc=secret_doc, rating=-1,
               corrected=f"The reserve account is {SECRET}.")

        def dataset(audience: str) -> tuple[dict, dict[str, tuple[str, str]]]:
            snapshot = asyncio.run(build_dataset(res.db, res.store, audience=audience, root=tmp_path / audience,
                                                 heldout_share=0.0, since=None, write_qa=None,
                                                 make_grounder=lexical_grounder))
            return snapshot.counts, {r.question: (r.origin, r.answer) for r in read_snapshot(snapshot.path)}

        counts, rows = dataset("everyone")
        assert rows == {
            "How often are laptops replaced?": ("correction", "Every four years; ask [EMAIL] for an early one."),
            "Where do I fetch my laptop?": ("correction", "At the IT desk on floor 2, within five working days."),
        }
        assert counts["correction"] == 2 and counts["excluded_acl"] == 1 and counts["pii_email"] == 1
        # The finance group's own adapter may learn what its members may all read.
        counts, rows = dataset("group:finance")
        assert rows["Which account is the reserve?"] == ("correction", f"The reserve account is {SECRET}.")
        assert counts["excluded_acl"] == 0
    finally:
        res.close()


def test_unrendered_template_placeholders_are_not_learnt(tmp_path):
    """Handbook pages hold their site generator's placeholders (`{{generator:...}}`) unrendered: a section
    that is only one is left out of the passages pairs are written from, and a placeholder inside real
    text is stripped while that text is kept (fresh-user trial: a placeholder became training text)."""
    from finetune.dataset import build_dataset
    from finetune.pipeline import lexical_grounder
    from ingest.pipeline import Ingestor
    from tests.conftest import copy_subset, open_resources
    from tests.corpus import HANDBOOK

    pages = ["departments/tech-ops/index.md", "team/index.md"]  # a placeholder-only section; one inside text
    assert all("{{generator:" in (HANDBOOK / p).read_text() for p in pages)
    passages: list[str] = []

    async def write_qa(messages: list[dict]) -> str:
        """A stand-in writer: asks what the passage says and answers with its longest line."""
        passage = messages[-1]["content"].split("\n", 1)[1]
        passages.append(passage)
        return f"Q: What does the passage say?\nA: {max(passage.splitlines(), key=len)}"

    res = open_resources(make_settings(tmp_path / "var"))
    try:
        Ingestor(res).sync(copy_subset(HANDBOOK, tmp_path / "docs", pages))
        snapshot = asyncio.run(build_dataset(res.db, res.store, audience="everyone", root=tmp_path / "ft",
                                             heldout_share=0.0, since=None, write_qa=write_qa,
                                             make_grounder=lexical_grounder, max_new_chunks=100))
    finally:
        res.close()
    assert passages and not [p for p in passages if "{{" in p or "{%" in p]
    assert not [p for p in passages if "Our Team" in p and len(p.split()) < 6]  # the placeholder-only section
    assert any("driven by a data file" in p for p in passages)  # the team page's text, its placeholder gone
    text = Path(snapshot.path).read_text()
    assert "{{" not in text and "generator:" not in text
    assert snapshot.counts["document"] >= 2


def test_gate_judges_answers_of_the_served_model_and_refuses_an_adapter_that_harms_them(refreshed, tmp_path):
    """The gate's answer half on the embedded default: the held-aside questions are answered through the
    product's answering (retrieval, abstention rule, prompt, grounding) by llama.cpp itself, base against
    base + the candidate's GGUF LoRA; `assistant eval` judges them. A broken adapter (the trained one with
    its updates scaled up eightfold, so that it garbles answers) is refused and its answer share is lower."""
    import shutil
    from dataclasses import replace

    from safetensors.torch import load_file, save_file

    from assistant.composition import Assistant
    from finetune.evaluate import AnswerCheck, answer_questions, answers_regressed, run_gate

    metrics = refreshed["outcome"].adapter.metrics
    assert metrics["answer_model"] == "llama.cpp" and metrics["against"] == "base"
    assert metrics["answer_questions"] == 3 and metrics["answer_max_tokens"] == 24
    assert [r["id"] for r in metrics["answer_results"]] == ["replaced", "desk", "none"]
    for side in ("candidate", "live"):
        right = [r[side] for r in metrics["answer_results"]]
        assert metrics[f"answer_{side}"] == sum(right) / 3
        cited = [r[f"cited_{side}"] for r in metrics["answer_results"] if r["id"] != "none"]
        assert None not in cited and metrics[f"cited_{side}"] == sum(cited) / 2
    assert metrics["answer_live"] >= 2 / 3  # the base answers its documents' questions: something to lose

    res, good = refreshed["res"], refreshed["outcome"].adapter
    broken = tmp_path / "broken"
    shutil.copytree(good.path, broken, ignore=shutil.ignore_patterns("checkpoints", GGUF_ADAPTER_FILE))
    tensors = load_file(str(broken / "adapter_model.safetensors"))
    save_file(
        {k: v * 8 if ".lora_B." in k else v for k, v in tensors.items()}, str(broken / "adapter_model.safetensors")
    )
    export_gguf_lora(broken, model_type="qwen2", block_count=24)
    check = AnswerCheck(
        Assistant.build(res).answerer, answer_questions(refreshed["questions"], 3), max_tokens=24, tolerance=0.1
    )
    gate = run_gate(
        replace(good, name="broken", path=str(broken)),
        None,
        rows=read_snapshot(refreshed["outcome"].snapshot.path),
        questions=[],
        tolerance=1.0,  # the held-out loss does not decide when answers are judged
        answers=check,
        served=res.llm,
    )
    assert gate.metrics["answer_model"] == "llama.cpp" and gate.metrics["decided_on"] == "answers"
    assert not gate.passed and gate.reason.startswith("evaluation answers"), gate.metrics
    assert answers_regressed(gate.metrics["answer_candidate"], gate.metrics["answer_live"], 0.1), gate.metrics


def test_no_leak_restricted_strings_stay_out_of_dataset_and_log(refreshed):
    outcome = refreshed["outcome"]
    assert SECRET not in Path(outcome.snapshot.path).read_text()
    assert SECRET not in log_path(refreshed["config"], outcome.adapter.name).read_text()
    assert not any("reserve" in r.question.lower() for r in read_snapshot(outcome.snapshot.path))


# A fresh process of the product: argv = settings (JSON), the question, then the readers' names.
_REQUEST_SIDE = """
import asyncio, json, sys
from assistant.composition import adapter_router
from assistant.core.principals import Principal
from assistant.core.resources import Resources
from assistant.core.settings import Settings

settings = Settings(_env_file=None, **json.loads(sys.argv[1]))
res = Resources.open(settings, migrate=False)
router = adapter_router(res)  # the answerer's model (`Assistant.build`), without the embedder it also loads
out = {}
for name in sys.argv[3:]:
    llm = router.for_principal(Principal(name=name))
    text = asyncio.run(llm.complete([{"role": "user", "content": sys.argv[2]}], max_tokens=24, temperature=0.0))
    out[name] = [llm.served, text]
out["modules"] = sorted({m.split(".")[0] for m in sys.modules} & {"transformers", "peft", "torch"})
res.close()
print(json.dumps(out))
"""


def test_request_side_answers_the_canary_through_llama_cpp_without_transformers_or_peft(refreshed, tmp_path):
    """A fresh process of the product (its settings, the registry, the router `Assistant.build` gives the
    answerer) answers the canary reader with the adapter applied in llama.cpp and the live reader with the
    base: neither loads transformers, peft or torch. (The embedder is left out: the built-in ones other
    than e5's ONNX use transformers' tokenizers, which is no adapter's doing.)"""
    settings, adapter = refreshed["settings"], refreshed["outcome"].adapter
    canary, live = refreshed["readers"]
    overrides = {
        **OVERRIDES,
        "data_dir": str(tmp_path / "var"),
        "database_url": settings.resolved_database_url,
        "model_cache_dir": str(settings.model_cache_path),
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", _REQUEST_SIDE, json.dumps(overrides), FACT_Q, canary.name, live.name],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["modules"] == []
    assert out[canary.name][0] == adapter.name and CODE in out[canary.name][1]
    assert out[live.name] == [None, refreshed["before"][1][1]] and CODE not in out[live.name][1]


def test_teach_a_fact_canary_live_promote_and_rollback(refreshed):
    """Through the product's router (what the API answers with): the canary reader gets the taught fact
    from llama.cpp with the adapter, the live reader the base's answer as before; promoted, both get
    it; rolled back, both get exactly the answers they had before the refresh."""
    res, adapter, router = refreshed["res"], refreshed["outcome"].adapter, refreshed["router"]
    canary, live = refreshed["readers"]
    assert all(CODE not in text and served is None for served, text in refreshed["before"])
    router.refresh()
    served, text = _ask(router, canary)
    assert served == adapter.name and CODE in text
    assert isinstance(router.route(canary)[1], LlamaLoraLLM)  # llama.cpp with the LoRA, not a second model
    assert _ask(router, live) == refreshed["before"][1]  # no live adapter yet: the base, as before
    promote_and_publish(res.db, adapter.id, by="admin", publisher=InProcessPublisher())
    assert registry_db.get_adapter(res.db, adapter.id).status == "live"
    router.refresh()
    for reader in (canary, live):
        served, text = _ask(router, reader)
        assert served == adapter.name and CODE in text
    rollback_and_publish(res.db, audience="everyone", by="admin", publisher=InProcessPublisher())
    assert registry_db.get_adapter(res.db, adapter.id).status == "retired"
    router.refresh()
    assert [_ask(router, reader) for reader in (canary, live)] == refreshed["before"]


def test_an_adapter_llama_cpp_cannot_apply_is_refused_at_publish_and_never_served_through_peft(refreshed, tmp_path):
    """An adapter without `adapter.gguf` is exported when it is published; one that cannot be exported
    (trained on a base that is no GGUF here) is refused with the fix named, and the router refuses to
    serve it rather than load a transformers model."""
    import shutil

    res, good = refreshed["res"], refreshed["outcome"].adapter
    folder = tmp_path / "peft-only"
    shutil.copytree(good.path, folder, ignore=shutil.ignore_patterns("checkpoints", GGUF_ADAPTER_FILE))
    record = registry_db.add_adapter(
        res.db,
        name=f"peft-only-{uuid.uuid4().hex[:6]}",
        audience="group:exported",
        base_model=good.base_model,
        snapshot_id=None,
        job_id=None,
        hyperparameters={},
    )
    record = registry_db.update_adapter(res.db, record.id, path=str(folder))
    promote_and_publish(res.db, record.id, by="admin", publisher=InProcessPublisher(), to="live")
    assert (folder / GGUF_ADAPTER_FILE).is_file()  # exported at publish time
    registry_db.set_status(res.db, record.id, "retired", by="admin")

    other = tmp_path / "other-base"
    shutil.copytree(folder, other, ignore=shutil.ignore_patterns(GGUF_ADAPTER_FILE))
    stranger = registry_db.add_adapter(
        res.db,
        name=f"stranger-{uuid.uuid4().hex[:6]}",
        audience="group:stranger",
        base_model=str(tmp_path / "weights"),
        snapshot_id=None,
        job_id=None,
        hyperparameters={},
    )
    stranger = registry_db.update_adapter(res.db, stranger.id, path=str(other))
    with pytest.raises(ConflictError, match="assistant finetune run"):
        promote_and_publish(res.db, stranger.id, by="admin", publisher=InProcessPublisher(), to="live")
    assert registry_db.get_adapter(res.db, stranger.id).status == "candidate"  # the registry did not change
    registry_db.promote(res.db, stranger.id, by="admin", to="live")  # as if published before this rule
    try:
        router = refreshed["router"]
        router.refresh()
        with pytest.raises(ConfigError, match=GGUF_ADAPTER_FILE):
            router.route(Principal(name="member", groups=frozenset({"stranger"})))
    finally:
        registry_db.set_status(res.db, stranger.id, "retired", by="admin")
        refreshed["router"].refresh()


def test_group_adapter_is_never_served_to_a_non_member(refreshed):
    res, adapter = refreshed["res"], refreshed["outcome"].adapter
    group = registry_db.add_adapter(res.db, name=f"finance-{uuid.uuid4().hex[:6]}", audience="group:finance",
                                    base_model=adapter.base_model, snapshot_id=None, job_id=None, hyperparameters={})
    group = registry_db.update_adapter(res.db, group.id, path=adapter.path)
    registry_db.promote(res.db, group.id, by="admin", to="live")
    serving = registry_db.serving_adapters(res.db)
    for i in range(200):
        outsider = Principal(name=f"outsider-{i}", groups=frozenset({"sales"}))
        chosen = choose_adapter(serving, outsider, canary_share=1.0)
        assert chosen is None or chosen.audience == "everyone"
    member = Principal(name="member", groups=frozenset({"finance"}))
    assert choose_adapter(serving, member, canary_share=0.0).name == group.name
    registry_db.set_status(res.db, group.id, "retired", by="admin")


def test_a_run_with_nothing_new_fails_and_leaves_live_alone(refreshed):
    res, config = refreshed["res"], refreshed["config"]
    before = [(a.id, a.status) for a in registry_db.serving_adapters(res.db)]
    outcome = asyncio.run(run_refresh(res.db, res.store, config=config, publisher=InProcessPublisher(), llm=None))
    assert outcome.status == "failed" and "nothing new" in outcome.reason
    assert get_job(res.db, outcome.job_id).status == "failed"
    assert [(a.id, a.status) for a in registry_db.serving_adapters(res.db)] == before


def test_two_runs_never_overlap(refreshed):
    res, config = refreshed["res"], refreshed["config"]
    with job_lease(res.db, REFRESH_LEASE_ID) as lease:
        assert lease.acquired
        with pytest.raises(ConflictError):
            asyncio.run(run_refresh(res.db, res.store, config=config, publisher=InProcessPublisher(), llm=None))


def test_vllm_publisher_loads_and_unloads_by_name(refreshed):
    """vLLM's runtime LoRA endpoints, answered by a stand-in of the server (httpx's transport)."""
    calls = []

    def vllm(request: httpx.Request) -> httpx.Response:
        calls.append((request.url.path, json.loads(request.content)))
        return httpx.Response(200, text="Success")

    adapter = refreshed["outcome"].adapter
    publisher = VllmPublisher("http://vllm:8000/v1", transport=httpx.MockTransport(vllm))
    publisher.load(adapter)
    publisher.unload(adapter)
    assert calls == [("/v1/load_lora_adapter", {"lora_name": adapter.name, "lora_path": adapter.path}),
                     ("/v1/unload_lora_adapter", {"lora_name": adapter.name})]


def test_training_resumes_from_its_last_checkpoint(tmp_path):
    """A run stopped after its first checkpoint (as a killed one is) continues from it, not from step 0."""
    from finetune.dataset import Row
    from finetune.train import train_adapter

    rows = [Row("feedback", "r", "Where is the printer?", "On floor 2, beside the kitchen.")]
    hp = LoraHyperparameters(rank=4, alpha=8, epochs=2, batch_size=1, max_length_tokens=48)
    log = tmp_path / "log.jsonl"
    first = train_adapter(rows, base_model="builtin:smollm2-135m", hp=hp, out_dir=tmp_path / "a", log_path=log, max_steps=1)
    assert first.steps == 1 and any((tmp_path / "a" / "checkpoints").glob("checkpoint-1"))
    log.unlink()
    second = train_adapter(rows, base_model="builtin:smollm2-135m", hp=hp, out_dir=tmp_path / "a", log_path=log)
    steps = [entry["step"] for entry in map(json.loads, log.read_text().splitlines()) if "loss" in entry]
    assert second.steps == 2 and steps == [2]
    check_adapter(tmp_path / "a")


def test_a_killed_refresh_is_resumed_by_the_next_one(refreshed):
    """A refresh whose worker died after its first checkpoint leaves a `running` job and a candidate; the
    next refresh closes that job and continues the same adapter from the checkpoint, on the same snapshot."""
    from dataclasses import replace

    from finetune.train import train_adapter

    res = refreshed["res"]
    # No answerer here, so the held-out loss (one row) decides; its tolerance is open: the resume is tested.
    config = replace(refreshed["config"], gate_tolerance=1.0, lora=replace(refreshed["config"].lora, epochs=2))
    snapshot = refreshed["outcome"].snapshot
    killed_job = registry_db.start_finetune_job(res.db, {"audience": "everyone"})
    from finetune.registry import adapter_dir, register_candidate

    candidate = register_candidate(res.db, config, audience="everyone", snapshot_id=snapshot.id, job_id=killed_job)
    train_adapter(read_snapshot(snapshot.path), base_model=config.base_model, hp=config.lora,
                  out_dir=adapter_dir(config, candidate.name), log_path=log_path(config, candidate.name), max_steps=1)
    outcome = asyncio.run(run_refresh(res.db, res.store, config=config, publisher=InProcessPublisher(), llm=None))
    assert outcome.status == "done", outcome.reason
    assert outcome.adapter.id == candidate.id and outcome.adapter.status == "canary"
    # 2 epochs of the snapshot's training rows; step 1 (the killed run's) is logged once: it was not redone.
    rows = read_snapshot(snapshot.path)
    steps = 2 * math.ceil(sum(r.split == "train" for r in rows) / config.lora.batch_size)
    logged = [e["step"] for e in map(json.loads, log_path(config, candidate.name).read_text().splitlines()) if "loss" in e]
    assert outcome.snapshot.id == snapshot.id and outcome.adapter.metrics["train_steps"] == steps
    assert logged == list(range(1, steps + 1))
    killed = get_job(res.db, killed_job)
    assert killed.status == "failed" and f"resumed by job {outcome.job_id}" in killed.reason
