"""Pure rules of the refresh: who an adapter may learn from and serve, canary shares, duplicates, splits,
hyperparameters vLLM accepts, and the schedule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from assistant.adapters.routing import canary_bucket, choose_adapter
from assistant.adapters.store import AdapterRecord
from assistant.core.errors import ConfigError, InvalidRequestError
from assistant.core.jobs import crontab_schedule
from assistant.core.principals import Principal
from finetune.config import LoraHyperparameters, check_audience, training_base
from finetune.dataset import Row, drop_duplicates, passage_text, readable_by, split_rows
from tests.conftest import make_settings


def _adapter(name: str, audience: str, status: str) -> AdapterRecord:
    now = datetime.now(UTC)
    return AdapterRecord(id=hash(name) % 1000, name=name, audience=audience, base_model="b", snapshot_id=None, job_id=None,
                         hyperparameters={}, metrics={}, files={}, path="/x", status=status, reason="", history=[],
                         created_at=now, promoted_by=None, promoted_at=None)


@pytest.mark.parametrize("acl, audience, readable", [
    (["everyone"], "everyone", True),
    (["group:hr"], "everyone", False),
    (["group:hr", "everyone"], "everyone", True),
    (["group:hr"], "group:hr", True),
    (["group:finance"], "group:hr", False),
    (["user:alice"], "everyone", False),
    ([], "everyone", False),
])
def test_only_what_the_whole_audience_may_read(acl, audience, readable):
    assert readable_by(acl, audience) is readable


@pytest.mark.parametrize("audience", ["user:alice", "anonymous", "group:", "everyone group:x", ""])
def test_an_audience_is_everyone_or_a_group(audience):
    with pytest.raises(InvalidRequestError):
        check_audience(audience)


def test_canary_share_is_stable_and_close_to_the_setting():
    users = [f"user-{i}" for i in range(2000)]
    share = sum(canary_bucket(u, "everyone") < 0.1 for u in users) / len(users)
    assert 0.08 <= share <= 0.12
    assert [canary_bucket(u, "everyone") for u in users[:50]] == [canary_bucket(u, "everyone") for u in users[:50]]


def test_routing_prefers_the_readers_group_and_never_another_group():
    adapters = [_adapter("all-live", "everyone", "live"), _adapter("all-canary", "everyone", "canary"),
                _adapter("hr-live", "group:hr", "live")]
    assert choose_adapter(adapters, Principal(name="a", groups=frozenset({"hr"})), canary_share=0.0).name == "hr-live"
    assert choose_adapter(adapters, Principal(name="b"), canary_share=0.0).name == "all-live"
    assert choose_adapter(adapters, Principal(name="b"), canary_share=1.0).name == "all-canary"
    assert choose_adapter([_adapter("hr-live", "group:hr", "live")], Principal(name="c"), canary_share=1.0) is None


def test_near_duplicates_are_dropped_and_the_split_is_stable():
    rows = [Row("feedback", "1", "How do I reset my VPN password?", "Open the portal and choose reset."),
            Row("feedback", "2", "How do I reset my VPN password ?", "Open the portal and choose reset!"),
            Row("helpdesk", "3", "Where is the printer?", "On floor 2.")]
    kept, dropped = drop_duplicates(rows)
    assert dropped == 1 and [r.ref for r in kept] == ["1", "3"]
    many = [Row("feedback", str(i), f"question number {i}", "answer") for i in range(400)]
    split = split_rows(many, 0.2)
    assert 0.14 <= sum(r.split == "heldout" for r in split) / 400 <= 0.26
    assert split == split_rows(many, 0.2)
    assert split_rows(many[:1], 0.99)[0].split == "train"


@pytest.mark.parametrize("text, passage", [
    ("## Members\n\n{{generator:reporting_structure.director_legal}}", None),  # only a placeholder
    ("{% for m in members %}{{ m.name }}{% endfor %}", None),
    ("### Roles\n\n{{ roles }} {{ more }} and more", None),  # two words besides the template
    ("Ask the IT desk on floor 2.\n\n{{generator:team_members_list}}", "Ask the IT desk on floor 2."),
    ("{% if eu %}Invoices go to the Dublin office.{% endif %}", "Invoices go to the Dublin office."),
    ("A set {a, b} and a dict {'k': 1} are not templates.", "A set {a, b} and a dict {'k': 1} are not templates."),
])
def test_template_syntax_is_stripped_and_placeholder_only_chunks_are_left_out(text, passage):
    assert passage_text(text) == passage


@pytest.mark.parametrize("kwargs", [{"rank": 32}, {"rank": 0}, {"target_modules": ("embed_tokens",)}, {"target_modules": ()}])
def test_hyperparameters_vllm_cannot_load_are_refused(kwargs):
    with pytest.raises(InvalidRequestError):
        LoraHyperparameters(**kwargs)


def test_settings_refuse_modules_vllm_cannot_load_and_bad_cron(tmp_path):
    with pytest.raises(Exception, match="FINETUNE_TARGET_MODULES"):
        make_settings(tmp_path, finetune_target_modules=["lm_head"])
    with pytest.raises(Exception, match="FINETUNE_SCHEDULE_CRON"):
        make_settings(tmp_path, finetune_schedule_cron="monthly")


def test_the_schedule_is_monthly_by_default(tmp_path):
    schedule = crontab_schedule(make_settings(tmp_path).finetune.schedule_cron)
    assert schedule.day_of_month == {1} and schedule.hour == {3} and schedule.minute == {0}


def test_training_base_is_the_served_gguf_and_another_base_is_refused_naming_both(tmp_path):
    served = tmp_path / "served.gguf"
    other = tmp_path / "other.gguf"
    served.write_bytes(b"GGUF")
    other.write_bytes(b"GGUF")
    settings = lambda **kw: make_settings(tmp_path / "var", llm_model_path=served, **kw)  # noqa: E731
    assert training_base(settings()) == str(served.resolve())  # the default, `served`
    assert training_base(settings(finetune_base_model=str(served))) == str(served.resolve())
    for wrong in (str(other), "builtin:qwen2.5-1.5b", "builtin:smollm2-135m"):
        with pytest.raises(ConfigError) as refused:
            training_base(settings(finetune_base_model=wrong))
        assert wrong in str(refused.value) and str(served.resolve()) in str(refused.value)


def test_training_base_of_a_builtin_model_must_be_the_one_llm_model_names(tmp_path):
    # Refused before any GGUF is assembled: the names differ.
    with pytest.raises(ConfigError, match=r"builtin:qwen2\.5-1\.5b.*qwen2\.5-0\.5b"):
        training_base(make_settings(tmp_path / "var", llm_model="qwen2.5-0.5b", llm_model_path=tmp_path / "q.gguf",
                                    finetune_base_model="builtin:qwen2.5-1.5b"))


def test_served_base_with_the_openai_backend_must_name_the_bf16_folder(tmp_path):
    with pytest.raises(ConfigError, match="bf16"):
        training_base(make_settings(tmp_path / "var", llm_backend="openai"))
    folder = str(tmp_path / "Qwen2.5-7B-Instruct")
    assert training_base(make_settings(tmp_path / "var", llm_backend="openai", finetune_base_model=folder)) == folder


_SCORES = {"against": "base", "tolerance": 0.05, "heldout_candidate": 1.0, "heldout_live": 1.1,
           "eval_candidate": 18.3, "eval_live": 12.7}  # the bare key fact less likely, as after training
_ANSWERS = {"answer_tolerance": 0.1, "answer_live": 1.0, "cited_live": 1.0}


@pytest.mark.parametrize("scores, passed, reason", [
    # Answers judged: they decide; a key fact's likelihood rising (12.7 -> 18.3 nats) refuses nothing.
    ({**_ANSWERS, "answer_candidate": 1.0, "cited_candidate": 1.0}, True, ""),
    ({**_ANSWERS, "answer_candidate": 1.0, "cited_candidate": 1.0, "heldout_candidate": 3.0}, True, ""),
    ({**_ANSWERS, "answer_candidate": 2 / 3, "cited_candidate": 1.0}, False, "67% answered right, base 100%"),
    ({**_ANSWERS, "answer_candidate": 1.0, "cited_candidate": 0.5}, False, "50% answers citing their file"),
    ({**_ANSWERS, "answer_candidate": 0.95, "cited_candidate": None}, True, ""),  # within the tolerance
    # No answers judged: the held-out rows' loss decides.
    ({}, True, ""),
    ({"heldout_candidate": 1.2}, False, "held-out loss 1.2000 is worse than base's 1.1000"),
    ({"answer_candidate": None, "answer_live": None, "heldout_candidate": 1.2}, False, "held-out loss"),
])
def test_the_gate_decides_on_answers_when_judged_else_on_held_out_loss(scores, passed, reason):
    from finetune.evaluate import decide

    verdict = decide({**_SCORES, **scores})
    assert verdict.passed is passed and reason in verdict.reason
    answers = scores.get("answer_candidate") is not None
    assert verdict.metrics["decided_on"] == ("answers" if answers else "heldout")
