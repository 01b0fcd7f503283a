"""The helpdesk's state on real PostgreSQL and Redis: the migration, idempotency claims under concurrency,
rate-limit counters shared by two limiter instances (two API processes), and webhook attempts recorded
against a real receiver."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from assistant.api.rate_limit_store import Limits, RateLimitedError, RateLimiter
from assistant.auth.api_keys import configure_api_key, create_api_key
from assistant.core.db.session import Database
from assistant.core.errors import ConflictError, InvalidRequestError
from assistant.helpdesk.delivery import attempt_delivery
from assistant.helpdesk.store import claim_ticket, list_deliveries, queue_delivery, store_decision
from tests.conftest import make_settings

REDIS_URL = "redis://127.0.0.1:6379/0"
FIELDS = dict(subject="s", body="b", requester="alice", requester_known=True, category=None, language="en", external_id=None)


@pytest.fixture
def pg_db(pg_url):
    db = Database(pg_url)
    db.migrate()
    yield db
    db.dispose()


def test_one_of_concurrent_claims_of_a_key_generates(pg_db):
    def claim(_):
        try:
            return claim_ticket(pg_db, client="hd", idempotency_key="k1", request_hash="h", fields=FIELDS).new
        except ConflictError as exc:
            return exc.code

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(claim, range(8)))
    assert results.count(True) == 1
    assert set(results) - {True} <= {"ticket_in_progress"}


def test_a_key_still_being_answered_tells_the_client_when_to_retry(pg_db):
    claim_ticket(pg_db, client="hd", idempotency_key="k-wait", request_hash="h", fields=FIELDS)
    with pytest.raises(ConflictError) as refused:
        claim_ticket(pg_db, client="hd", idempotency_key="k-wait", request_hash="h", fields=FIELDS)
    assert refused.value.code == "ticket_in_progress"
    assert int(refused.value.headers["Retry-After"]) > 0


def test_a_decided_key_replays_and_refuses_another_body(pg_db):
    first = claim_ticket(pg_db, client="hd", idempotency_key="k2", request_hash="h", fields=FIELDS)
    store_decision(pg_db, first.record.id, values={"decision": "auto_reply", "confidence": 0.8, "reply": "r [1]."})
    again = claim_ticket(pg_db, client="hd", idempotency_key="k2", request_hash="h", fields=FIELDS)
    assert not again.new and again.record.id == first.record.id and again.record.decision == "auto_reply"
    with pytest.raises(ConflictError) as refused:
        claim_ticket(pg_db, client="hd", idempotency_key="k2", request_hash="other", fields=FIELDS)
    assert refused.value.code == "idempotency_conflict"
    # Keys are per client: another helpdesk may use the same one.
    assert claim_ticket(pg_db, client="other", idempotency_key="k2", request_hash="h", fields=FIELDS).new


def test_key_options_are_kept_per_key(pg_db):
    create_api_key(pg_db, "hd-opts", groups=["it"])
    options = configure_api_key(pg_db, "hd-opts", requests_per_minute=30, webhook_url="https://hooks.example.com/x")
    assert options.webhook_secret.startswith("whsec_")
    with pytest.raises(InvalidRequestError):
        configure_api_key(pg_db, "hd-opts", tokens_per_minute=-1)
    kept = configure_api_key(pg_db, "hd-opts", tokens_per_minute=1000)
    assert (kept.requests_per_minute, kept.tokens_per_minute, kept.webhook_secret) == (30, 1000, options.webhook_secret)


def test_redis_counters_are_shared_by_two_limiters():
    key = f"test-{uuid.uuid4().hex}"
    limits = Limits(requests_per_minute=3, tokens_per_minute=0)
    one, two = RateLimiter(REDIS_URL), RateLimiter(REDIS_URL)
    assert one.admit(key, limits).requests[1] == 2
    assert two.admit(key, limits).requests[1] == 1
    one.admit(key, limits)
    with pytest.raises(RateLimitedError) as refused:
        two.admit(key, limits)
    assert refused.value.headers["x-ratelimit-remaining-requests"] == "0" and int(refused.value.headers["Retry-After"]) >= 1
    # In memory, each process counts on its own.
    memory = RateLimiter(None)
    assert memory.admit(key, limits).requests[1] == 2


def test_tokens_are_charged_past_the_limit_and_then_refuse():
    key = f"test-{uuid.uuid4().hex}"
    limits = Limits(requests_per_minute=0, tokens_per_minute=100)
    limiter = RateLimiter(REDIS_URL)
    limiter.admit(key, limits)
    limiter.charge_tokens(key, limits, 150)
    with pytest.raises(RateLimitedError) as refused:
        limiter.admit(key, limits)
    assert refused.value.headers["x-ratelimit-limit-tokens"] == "100"


class FlakyReceiver:
    """A real HTTP server answering the given status codes in turn (the last one repeated)."""

    def __init__(self, codes: list[int]):
        self.codes, self.hits = codes, 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                code = receiver.codes[min(receiver.hits, len(receiver.codes) - 1)]
                receiver.hits += 1
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.mark.parametrize(
    "codes,max_attempts,statuses,final",
    [
        ([503, 200], 5, [503, 200], "delivered"),
        ([500], 3, [500, 500, 500], "dead"),  # dead-lettered after the last try
        ([400], 5, [400], "dead"),  # the receiver refuses for good: no retry
        ([429, 204], 5, [429, 204], "delivered"),
    ],
)
def test_attempts_are_recorded_until_delivered_or_dead(pg_db, tmp_path, codes, max_attempts, statuses, final):
    receiver = FlakyReceiver(codes)
    try:
        settings = make_settings(tmp_path / "var", webhook_allowed_hosts=["127.0.0.1"], webhook_max_attempts=max_attempts,
                                 webhook_backoff_s=0.01)
        name = f"hook-{uuid.uuid4().hex[:6]}"
        create_api_key(pg_db, name)
        configure_api_key(pg_db, name, webhook_url=receiver.url)
        ticket = claim_ticket(pg_db, client=name, idempotency_key="k", request_hash="h", fields=FIELDS).record
        delivery = queue_delivery(pg_db, ticket_id=ticket.id, client=name, url=receiver.url, event="ticket.decided",
                                  payload={"ticket_id": ticket.id})
        delays = []
        while (delay := attempt_delivery(pg_db, delivery.id, settings=settings)) is not None:
            delays.append(delay)
        [stored] = list_deliveries(pg_db, client=name)
        assert stored.status == final and [a["status_code"] for a in stored.attempts] == statuses
        assert delays == pytest.approx([0.01 * 2**i for i in range(len(statuses) - 1)])  # backoff doubles
    finally:
        receiver.close()


def test_a_url_taken_off_the_allow_list_is_not_called(pg_db, tmp_path):
    receiver = FlakyReceiver([200])
    try:
        settings = make_settings(tmp_path / "var", webhook_allowed_hosts=["hooks.example.com"])
        name = f"hook-{uuid.uuid4().hex[:6]}"
        create_api_key(pg_db, name)
        configure_api_key(pg_db, name, webhook_url=receiver.url)
        ticket = claim_ticket(pg_db, client=name, idempotency_key="k", request_hash="h", fields=FIELDS).record
        delivery = queue_delivery(pg_db, ticket_id=ticket.id, client=name, url=receiver.url, event="e", payload={})
        assert attempt_delivery(pg_db, delivery.id, settings=settings) is None
        [stored] = list_deliveries(pg_db, client=name)
        assert stored.status == "dead" and "allow-list" in stored.attempts[0]["error"] and receiver.hits == 0
    finally:
        receiver.close()


def test_keys_commands_set_limits_and_an_allow_listed_webhook(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from assistant.cli.main import app
    from assistant.core.settings import get_settings

    monkeypatch.setenv("ASSISTANT_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("ASSISTANT_WEBHOOK_ALLOWED_HOSTS", '["hooks.example.com"]')
    get_settings.cache_clear()
    try:
        assert CliRunner().invoke(app, ["keys", "create", "hd"]).exit_code == 0
        limited = CliRunner().invoke(app, ["keys", "limits", "hd", "--rpm", "30"])
        assert limited.exit_code == 0 and "requests/min 30" in limited.output
        refused = CliRunner().invoke(app, ["keys", "webhook", "hd", "https://evil.example.net/x"])
        assert refused.exit_code == 2 and "allow-list" in refused.output
        hooked = CliRunner().invoke(app, ["keys", "webhook", "hd", "https://hooks.example.com/in"])
        assert hooked.exit_code == 0 and hooked.stdout.strip().startswith("whsec_")
        db = Database(get_settings().resolved_database_url)
        try:
            from assistant.auth.api_keys import webhook_secret_for

            assert webhook_secret_for(db, "hd") == hooked.stdout.strip()
        finally:
            db.dispose()
    finally:
        get_settings.cache_clear()
