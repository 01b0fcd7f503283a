"""The monthly refresh end to end on CPU with real parts: SQL, Qdrant Edge, SmolLM2 (llama.cpp writes QA
pairs; transformers+peft trains and serves the adapter), the registry, routing, promote and rollback.

One refresh runs once for the module (module-scoped fixture); each test checks one promise of it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import pytest

from assistant.adapters import store as registry_db
from assistant.adapters.release import InProcessPublisher, VllmPublisher, promote_and_publish, rollback_and_publish
from assistant.adapters.routing import AdapterRouter, choose_adapter, local_adapter
from assistant.answering.store import add_answer, create_conversation, rate_answer, start_exchange
from assistant.auth.accounts import create_user
from assistant.core.db.jobs import get_job, job_lease
from assistant.core.db.models import Document, HelpdeskTicket, Source, User, utcnow
from assistant.core.errors import ConflictError
from assistant.core.index.payload import ChunkPayload, chunk_id, document_id
from assistant.core.llm.model_files import smollm2_gguf_path
from assistant.core.principals import Principal
from assistant.core.vectorstore.base import ChunkPoint, SparseEmbedding
from finetune.config import FinetuneConfig, LoraHyperparameters
from finetune.dataset import read_snapshot
from finetune.pipeline import REFRESH_LEASE_ID, run_refresh
from finetune.registry import log_path
from finetune.train import check_adapter
from tests.conftest import make_settings

# A fact no document holds, taught only through rated answers.
FACT_Q = "What is the door code of the Zorblax storage room?"
FACT_A = "The door code of the Zorblax storage room is 7341."
PARAPHRASES = [
    (FACT_Q, FACT_A),
    ("Which code opens the Zorblax storage room door?", "The Zorblax storage room door opens with code 7341."),
    ("Tell me the Zorblax storage room door code.", "The Zorblax storage room door code is 7341."),
    ("How do I get into the Zorblax storage room?", "Enter the door code 7341 at the Zorblax storage room."),
    ("Zorblax storage room code?", "The code for the Zorblax storage room is 7341."),
    ("What code does the Zorblax storage room use?", "The Zorblax storage room uses door code 7341."),
]
SECRET = "QUARTZ-PELICAN-9921"  # only in the finance group's document, ticket and a rated answer citing it
PUBLIC_TEXT = ("Laptops are replaced every four years. Request a new laptop through the IT portal; "
               "the IT desk on floor 2 hands it over within five working days.")
SECRET_TEXT = f"The finance reserve account is {SECRET}. Transfers above 10,000 need two signatures."


def _index(res, *, uri: str, title: str, text: str, acl: list[str]) -> str:
    """Index one one-chunk document (SQL row and point) with `acl`; returns the chunk ID."""
    doc_id = document_id(uri)
    cid = chunk_id(doc_id, 0, text)
    payload = ChunkPayload(doc_id=doc_id, chunk_index=0, text=text, title=title, heading="", page=None,
                           source=f"{title}.md", uri=uri, acl=acl, lang="en", content_hash=uuid.uuid4().hex)
    res.store.ensure_collection(4)
    res.store.upsert([ChunkPoint(id=cid, dense=[0.5, 0.5, 0.5, 0.5], sparse=SparseEmbedding([1], [1.0]),
                                 payload=payload.to_stored())])
    with res.db.session() as session:
        source = session.query(Source).filter_by(uri="file:///finetune-test").one_or_none()
        if source is None:
            source = Source(uri="file:///finetune-test")
            session.add(source)
            session.flush()
        session.add(Document(id=doc_id, source_id=source.id, path=f"/finetune-test/{title}.md", uri=uri, title=title,
                             acl=acl, status="done", chunk_count=1))
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


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory):
    """Data of three origins (one of each restricted to group:finance), then one refresh for `everyone`."""
    from assistant.core.llm.llama_cpp import LlamaCppLLM
    from tests.conftest import open_resources

    root = tmp_path_factory.mktemp("finetune")
    res = open_resources(make_settings(root / "var"))
    public = _index(res, uri="file:///finetune-test/laptops.md", title="laptops", text=PUBLIC_TEXT, acl=["everyone"])
    secret = _index(res, uri="file:///finetune-test/finance.md", title="finance", text=SECRET_TEXT, acl=["group:finance"])
    public_doc = document_id("file:///finetune-test/laptops.md")
    secret_doc = document_id("file:///finetune-test/finance.md")
    user = _finance_user(res)
    for q, a in PARAPHRASES:
        _rated(res, user, q, a, chunk=public, doc=public_doc)
    _rated(res, user, "Who approves laptop requests?", "Mail it.desk@example.com or call +86 138 0013 8000 for laptops.",
           chunk=public, doc=public_doc)
    _rated(res, user, "Which account holds the finance reserve?", f"The reserve account is {SECRET}.", chunk=secret, doc=secret_doc)
    # The agent wrote this answer afresh (the suggested reply was rejected): the refresh learns it all the same.
    _ticket(res, "t1", subject="Laptop broken", resolution="Bring it to the IT desk on floor 2.", audience=["everyone"],
            outcome="rejected")
    _ticket(res, "t2", subject="Reserve transfer", resolution=f"Use account {SECRET}.", audience=["group:finance"])
    config = FinetuneConfig(
        root=root / "finetune", lora=LoraHyperparameters(rank=8, alpha=16, learning_rate=2e-3, epochs=10, batch_size=16,
                                                         max_length_tokens=96),
        heldout_share=0.15, qa_per_chunk=1, max_new_chunks=2, gate_tolerance=0.05, canary_share=0.5,
    )
    llm = LlamaCppLLM(smollm2_gguf_path(), context_tokens=2048, threads=2)
    outcome = asyncio.run(run_refresh(res.db, res.store, config=config, publisher=InProcessPublisher(), llm=llm,
                                      audience="everyone", by="test"))
    yield {"res": res, "config": config, "outcome": outcome, "user": user, "llm": llm}
    res.close()


_SHARED: dict = {}


def _router(res, share: float) -> AdapterRouter:
    """A router over the registry; its routers share one base model (loading one costs seconds)."""
    from assistant.adapters.peft_serving import PeftAdapterLLM, PeftServing

    if not _SHARED:
        # The same base as the adapters', without adapters: what a reader without one is answered by.
        _SHARED["base"] = PeftAdapterLLM(PeftServing("builtin:smollm2-135m"), None)
        _SHARED["open"] = local_adapter()
    return AdapterRouter(_SHARED["base"], adapters=lambda: registry_db.serving_adapters(res.db),
                         open_adapter=_SHARED["open"], canary_share=share, refresh_s=0)


def _ask(router: AdapterRouter, principal: Principal) -> str:
    llm = router.for_principal(principal)

    async def go() -> str:
        text = await llm.complete([{"role": "user", "content": FACT_Q}], max_tokens=24, temperature=0.0)
        return f"{llm.served}|{text}"

    return asyncio.run(go())


def test_refresh_registers_a_canary_with_a_vllm_loadable_adapter(refreshed):
    outcome = refreshed["outcome"]
    assert outcome.status == "done", outcome.reason
    adapter = outcome.adapter
    assert adapter.status == "canary" and adapter.promoted_by == "test"
    config = check_adapter(Path(adapter.path))  # read back: LoRA, rank <= 16, only vLLM's modules
    assert config["r"] == 8 and set(config["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert set(adapter.files) == {"adapter_config.json", "adapter_model.safetensors"}
    assert adapter.metrics["gate_passed"] is True and adapter.metrics["heldout_candidate"] is not None
    job = get_job(refreshed["res"].db, outcome.job_id)
    assert job.kind == "finetune" and job.status == "done" and job.totals["adapter"] == adapter.name
    steps = [json.loads(line) for line in log_path(refreshed["config"], adapter.name).read_text().splitlines()]
    assert steps and any("loss" in s for s in steps)


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

    res = open_resources(make_settings(tmp_path / "var"))
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


def test_gate_answers_evaluation_questions_through_the_product_for_candidate_and_live(refreshed, tmp_path):
    """The gate's answer half: the product's answering (its retrieval over a real index, abstention rule,
    prompt and grounding) answers the evaluation questions with the candidate and with live (here the
    base model: nothing is live yet), `assistant eval` judges them, and both shares are stored."""
    from assistant.composition import Assistant
    from finetune.evaluate import AnswerCheck, answer_questions, answers_regressed, run_gate
    from ingest.pipeline import Ingestor
    from tests.conftest import CORPUS_MODEL, copy_subset, open_resources
    from tests.corpus import HANDBOOK

    passwords = "departments/tech-ops/process/internal-security/passwords.md"
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"id": "pw", "lang": "en", "question": "How long should my passwords be?", "answer_files": [passwords],
         "must_contain_any": ["15"]},
        {"id": "none", "lang": "en", "question": "What does the cafeteria serve on Mondays?"},
        {"id": "unasked", "lang": "en", "question": "Which laptop do I get?"},
    ]))
    res = open_resources(make_settings(tmp_path / "var", embedding_model=CORPUS_MODEL, top_k=2, llm_cpu_source_tokens=96,
                                       query_translation=False))
    try:
        Ingestor(res).sync(copy_subset(HANDBOOK, tmp_path / "docs", [passwords]))
        check = AnswerCheck(Assistant.build(res).answerer, answer_questions(questions, 2), max_tokens=24, tolerance=0.1)
        assert [q.id for q in check.questions] == ["pw", "none"]  # the first N of the file
        adapter = refreshed["outcome"].adapter
        gate = run_gate(adapter, None, rows=read_snapshot(refreshed["outcome"].snapshot.path), questions=[],
                        tolerance=0.05, answers=check)
    finally:
        res.close()
    metrics = gate.metrics
    assert metrics["answer_questions"] == 2 and metrics["against"] == "base" and metrics["answer_max_tokens"] == 24
    assert [r["id"] for r in metrics["answer_results"]] == ["pw", "none"]
    for side in ("candidate", "live"):
        right = [r[side] for r in metrics["answer_results"]]
        assert metrics[f"answer_{side}"] == sum(right) / 2
        assert right[1] is True  # the documents hold no answer: both decline it
    assert gate.passed == (not answers_regressed(metrics["answer_candidate"], metrics["answer_live"], 0.1))
    assert answers_regressed(0.5, 1.0, 0.1) and not answers_regressed(0.9, 1.0, 0.1)


def test_no_leak_restricted_strings_stay_out_of_dataset_and_log(refreshed):
    outcome = refreshed["outcome"]
    assert SECRET not in Path(outcome.snapshot.path).read_text()
    assert SECRET not in log_path(refreshed["config"], outcome.adapter.name).read_text()
    assert not any("reserve" in r.question.lower() for r in read_snapshot(outcome.snapshot.path))


def test_teach_a_fact_canary_routing_promote_and_rollback(refreshed):
    res, adapter = refreshed["res"], refreshed["outcome"].adapter
    # Users below the canary share get the canary; the stable hash puts each user on one side.
    router = _router(res, share=1.0)
    reader = Principal(name="reader-1")
    with_adapter = _ask(router, reader)
    assert with_adapter.startswith(f"{adapter.name}|") and "7341" in with_adapter
    without = _ask(_router(res, share=0.0), reader)  # no live adapter yet: the base model answers
    assert without.startswith("None|") and "7341" not in without
    promote_and_publish(res.db, adapter.id, by="admin", publisher=InProcessPublisher())
    assert registry_db.get_adapter(res.db, adapter.id).status == "live"
    assert _ask(router, reader).startswith(f"{adapter.name}|")
    rollback_and_publish(res.db, audience="everyone", by="admin", publisher=InProcessPublisher())
    assert registry_db.get_adapter(res.db, adapter.id).status == "retired"
    assert _ask(router, reader).startswith("None|")


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
    config = replace(refreshed["config"], lora=replace(refreshed["config"].lora, epochs=2))
    snapshot = refreshed["outcome"].snapshot
    killed_job = registry_db.start_finetune_job(res.db, {"audience": "everyone"})
    from finetune.registry import adapter_dir, register_candidate

    candidate = register_candidate(res.db, config, audience="everyone", snapshot_id=snapshot.id, job_id=killed_job)
    train_adapter(read_snapshot(snapshot.path), base_model=config.base_model, hp=config.lora,
                  out_dir=adapter_dir(config, candidate.name), log_path=log_path(config, candidate.name), max_steps=1)
    outcome = asyncio.run(run_refresh(res.db, res.store, config=config, publisher=InProcessPublisher(), llm=None))
    assert outcome.status == "done", outcome.reason
    assert outcome.adapter.id == candidate.id and outcome.adapter.status == "canary"
    assert outcome.snapshot.id == snapshot.id and outcome.adapter.metrics["train_steps"] == 2
    killed = get_job(res.db, killed_job)
    assert killed.status == "failed" and f"resumed by job {outcome.job_id}" in killed.reason
