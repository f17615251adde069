"""The gateway stage: key check, rate limits, routing, the SQLite call log and the step list."""

import hmac
import json
import sqlite3
import threading
import time

import pytest

import lifecycle.api.keys as keys_module
from lifecycle.errors import LifecycleError
from lifecycle.api.calllog import CallLog, CallRecord, default_call_log_path
from lifecycle.api.config import ApiConfig
from lifecycle.api.errors import ApiError
from lifecycle.api.exchange import Exchange
from lifecycle.api.gateway import Gateway
from lifecycle.api.keys import bearer_token, check_api_key, new_api_key, parse_api_keys
from lifecycle.api.ratelimit import RateLimiter
from lifecycle.api.model_routing import route

SECRET = "sk-live-Qm7Tz2Lx9Vb4Nc8Rw1Yp5Kd3"
KEYS = {"alice": SECRET, "bob": "sk-other-1234567890"}
MODEL = "SmolLM2-135M-Instruct"


# --- API keys (checklist 1, 2) ----------------------------------------------------------------


def test_parse_api_keys():
    assert parse_api_keys("") == {}
    assert parse_api_keys(None) == {}
    assert parse_api_keys(" s1 , ops:s2,,  ci-bot.2 : s3 ") == {"key1": "s1", "ops": "s2", "ci-bot.2": "s3"}
    assert parse_api_keys("name:sec:ret") == {"name": "sec:ret"}


@pytest.mark.parametrize("value", ["bad name:secret1", "a:", ":secret1", "a:x,a:y"])
def test_parse_api_keys_rejects_bad_entries_without_echoing_secrets(value):
    with pytest.raises(LifecycleError) as caught:
        parse_api_keys(value)
    assert caught.value.param == "LIFECYCLE_API_KEYS"
    assert "secret1" not in caught.value.message and "\n" not in caught.value.message


def test_check_api_key_accepts_and_names_the_key():
    decision = check_api_key(SECRET, KEYS)
    assert (decision.allowed, decision.status, decision.key_name) == (True, 200, "alice")
    assert decision.error() is None
    assert check_api_key("sk-other-1234567890", KEYS).key_name == "bob"


@pytest.mark.parametrize("presented", [None, "", "wrong", SECRET[:-1], SECRET + "x", SECRET.upper(), "ключ"])
def test_check_api_key_refuses_with_openai_envelope(presented):
    decision = check_api_key(presented, KEYS)
    assert (decision.allowed, decision.status, decision.key_name) == (False, 401, None)
    error = decision.error()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_api_key")
    assert set(error) == {"message", "type", "param", "code"}
    assert SECRET not in repr(decision) and (not presented or presented not in error["message"])


def test_check_api_key_compares_every_key_in_constant_time(monkeypatch):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(keys_module.hmac, "compare_digest", spy)
    assert check_api_key(SECRET, KEYS).key_name == "alice"  # matches the first key, still compares the second
    assert len(calls) == len(KEYS)
    calls.clear()
    assert not check_api_key("nope", KEYS).allowed
    assert len(calls) == len(KEYS)


def test_no_configured_keys_refuses_everything():
    assert not check_api_key(SECRET, {}).allowed


def test_bearer_token_and_new_key():
    assert bearer_token(f"Bearer {SECRET}") == SECRET
    assert bearer_token(f"bearer   {SECRET} ") == SECRET
    for header in (None, "", "Bearer", "Basic abc", SECRET):
        assert bearer_token(header) is None
    first, second = new_api_key(), new_api_key()
    assert first != second and first.startswith("sk-") and len(first) > 30


# --- rate limiter (checklist 19) --------------------------------------------------------------


def test_allows_n_requests_then_429_with_headers():
    limiter = RateLimiter(requests_per_minute=3, tokens_per_minute=10_000)
    decisions = [limiter.decide("alice", 10, now=100.0) for _ in range(3)]
    assert all(d.allowed and d.status == 200 and d.retry_after == 0 for d in decisions)
    assert [d.headers["x-ratelimit-remaining-requests"] for d in decisions] == ["2", "1", "0"]
    assert decisions[-1].headers["x-ratelimit-remaining-tokens"] == "9970"
    assert "retry-after" not in decisions[-1].headers
    refused = limiter.decide("alice", 10, now=100.0)
    assert (refused.allowed, refused.status) == (False, 429)
    assert refused.retry_after == 20  # one request refills every 60/3 s
    assert refused.headers["retry-after"] == "20" and refused.headers["retry-after-ms"] == "20000"
    for name in ("limit-requests", "limit-tokens", "remaining-requests", "remaining-tokens", "reset-requests", "reset-tokens"):
        assert f"x-ratelimit-{name}" in refused.headers
    assert refused.headers["x-ratelimit-limit-requests"] == "3"
    assert refused.headers["x-ratelimit-reset-requests"] == "1m0s"
    error = refused.error()["error"]
    assert error["code"] == "rate_limit_exceeded" and "alice" in error["message"]


def test_refill_over_time_and_refusals_cost_nothing():
    limiter = RateLimiter(requests_per_minute=2, tokens_per_minute=10_000)
    assert limiter.decide("k", 1, now=0).allowed and limiter.decide("k", 1, now=0).allowed
    assert not limiter.decide("k", 1, now=10).allowed  # half a request refilled
    late = limiter.decide("k", 1, now=29.5)
    assert not late.allowed and late.retry_after == 1  # 0.5 s left, rounded up to a whole second
    assert limiter.decide("k", 1, now=30).allowed  # refused calls did not spend the refill
    assert limiter.snapshot("k", now=1000).requests == 2  # capped at capacity


def test_token_bucket_limits_tokens_separately():
    limiter = RateLimiter(requests_per_minute=100, tokens_per_minute=600)
    assert limiter.decide("k", 500, now=0).allowed
    refused = limiter.decide("k", 200, now=0)
    assert not refused.allowed and refused.retry_after == 10  # 100 tokens missing at 10 tokens/s
    assert refused.headers["x-ratelimit-remaining-tokens"] == "100"
    assert limiter.decide("k", 200, now=10).allowed
    too_big = limiter.decide("other", 601, now=0)
    assert not too_big.allowed and "too large" in too_big.message


def test_a_request_over_the_whole_minute_budget_is_400_since_no_wait_admits_it():
    limiter = RateLimiter(requests_per_minute=100, tokens_per_minute=600)
    too_big = limiter.decide("k", 601, now=0)
    assert (too_big.allowed, too_big.status, too_big.retry_after) == (False, 400, 0)
    assert "retry-after" not in too_big.headers and "retry-after-ms" not in too_big.headers
    assert too_big.error()["error"]["code"] == "request_too_large"
    assert limiter.decide("k", 600, now=0).allowed  # the refusal spent nothing
    waiting_helps = limiter.decide("k", 600, now=0)
    assert (waiting_helps.status, waiting_helps.retry_after) == (429, 60)
    assert waiting_helps.error()["error"]["code"] == "rate_limit_exceeded"


def test_keys_have_separate_buckets_and_snapshot_does_not_spend():
    limiter = RateLimiter(requests_per_minute=1, tokens_per_minute=100)
    assert limiter.decide("a", 50, now=0).allowed
    assert not limiter.decide("a", 1, now=0).allowed
    assert limiter.decide("b", 50, now=0).allowed
    before = limiter.snapshot("a", now=30)
    assert limiter.snapshot("a", now=30) == before
    assert (before.requests, before.tokens, before.requests_limit) == (0.5, 100, 1)
    assert before.requests_reset == 30


def test_clock_going_backwards_refills_nothing():
    limiter = RateLimiter(requests_per_minute=1, tokens_per_minute=100)
    assert limiter.decide("a", 1, now=100).allowed
    assert not limiter.decide("a", 1, now=50).allowed
    assert limiter.snapshot("a", now=100).requests == 0


def test_rate_limiter_is_thread_safe():
    limiter = RateLimiter(requests_per_minute=40, tokens_per_minute=1_000_000)
    results = []
    lock = threading.Lock()

    def hit():
        decision = limiter.decide("shared", 1, now=5.0)
        with lock:
            results.append(decision.allowed)

    threads = [threading.Thread(target=hit) for _ in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 40 and len(results) == 100


@pytest.mark.parametrize("rpm, tpm", [(0, 10), (10, 0), (-1, 10), (1.5, 10), (True, 10)])
def test_rate_limiter_rejects_bad_limits(rpm, tpm):
    with pytest.raises(LifecycleError):
        RateLimiter(rpm, tpm)


# --- routing (checklist 11) -------------------------------------------------------------------


def test_route_known_and_unknown_models():
    ok = route(MODEL, [MODEL])
    assert (ok.allowed, ok.status, ok.backend) == (True, 200, "local")
    assert route("m", {"m": "remote pool"}).backend == "remote pool"
    assert route(MODEL, MODEL).allowed
    missing = route("gpt-9\r\nX: y", [MODEL])
    assert (missing.allowed, missing.status, missing.backend) == (False, 404, None)
    error = missing.error()["error"]
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    assert "\r" not in error["message"] and "\n" not in error["message"]


# --- call log (checklist 2, 14, 22, 23) -------------------------------------------------------


def test_record_get_update_and_total(tmp_path):
    with CallLog(tmp_path / "calls.sqlite3") as log:
        log.record(CallRecord(id="c1", created=1.0, key_name="alice", model=MODEL, journey={"raw": {"a": [1, 2]}}))
        done = log.update("c1", status=200, outcome="ok", finish_reason="stop", prompt_tokens=20,
                          completion_tokens=7, ttft=0.12, duration=1.5)
        assert done.total_tokens == 27 and done.outcome == "ok" and done.journey == {"raw": {"a": [1, 2]}}
        assert log.get("c1") == done
        assert log.get("missing") is None
        with pytest.raises(LifecycleError):
            log.record(CallRecord(id="c1"))
        with pytest.raises(LifecycleError):
            log.update("c1", secret="x")
        with pytest.raises(LifecycleError):
            log.update("c1", id="c2")
        with pytest.raises(LifecycleError):
            log.update("nope", outcome="ok")


def test_log_survives_close_and_reopen(tmp_path):
    path = tmp_path / "nested" / "calls.sqlite3"
    log = CallLog(path)
    for index in range(5):
        log.record(CallRecord(id=f"call-{index}", created=100.0 + index, outcome="ok", prompt_tokens=index,
                              completion_tokens=1))
    log.update("call-2", outcome="cancelled", finish_reason="cancelled")
    log.close()
    reopened = CallLog(path)
    recent = reopened.recent(10)
    assert [r.id for r in recent] == ["call-4", "call-3", "call-2", "call-1", "call-0"]
    assert reopened.get("call-2").outcome == "cancelled"
    assert [r.id for r in reopened.recent(2)] == ["call-4", "call-3"]
    assert reopened.get("call-3").total_tokens == 4
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    reopened.close()


def test_fifty_threads_fifty_rows(tmp_path):
    path = tmp_path / "calls.sqlite3"
    logs = [CallLog(path), CallLog(path)]  # two connections, like two server processes
    errors = []

    def write(index):
        try:
            log = logs[index % 2]
            log.record(CallRecord(id=f"t{index}", key_name="alice", outcome="running"))
            log.update(f"t{index}", outcome="ok", status=200, prompt_tokens=index, completion_tokens=index)
        except Exception as error:  # collected so the assertion shows what went wrong
            errors.append(repr(error))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    rows = logs[0].recent(1000)
    assert len(rows) == 50 and {r.id for r in rows} == {f"t{i}" for i in range(50)}
    assert all(r.outcome == "ok" and r.total_tokens == 2 * int(r.id[1:]) for r in rows)
    for log in logs:
        log.close()


def test_secrets_never_reach_the_file(tmp_path):
    path = tmp_path / "calls.sqlite3"
    with CallLog(path, redact=KEYS.values()) as log:
        log.record(
            CallRecord(
                id="c1",
                key_name="alice",
                error=f"client sent {SECRET}",
                journey={"headers": {"authorization": f"Bearer {SECRET}", "x-note": "Bearer some-other-token"},
                         "body": {"note": f"my key is {SECRET}"}},
            )
        )
        stored = log.get("c1")
    assert stored.journey["headers"]["authorization"] == "Bearer <redacted>"
    assert stored.journey["headers"]["x-note"] == "Bearer <redacted>"
    assert stored.journey["body"]["note"] == "my key is <redacted>"
    assert SECRET.encode() not in path.read_bytes()
    assert b"some-other-token" not in path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or SECRET.encode() not in wal.read_bytes()


def test_crlf_and_control_characters_are_stored_intact(tmp_path):
    nasty = "line1\r\nINJECTED 200 ok\x1b[31m\x00\u2028end"
    with CallLog(tmp_path / "calls.sqlite3") as log:
        log.record(CallRecord(id="c\r\n1", model=nasty, error=nasty, journey={"frames": [nasty]}))
        stored = log.get("c\r\n1")
    assert stored.model == nasty and stored.error == nasty and stored.journey == {"frames": [nasty]}


def test_journey_json_is_plain_text(tmp_path):
    path = tmp_path / "calls.sqlite3"
    with CallLog(path) as log:
        log.record(CallRecord(id="c1", journey={"sse": [{"at": 0.01, "data": "data: [DONE]"}]}))
    text = sqlite3.connect(path).execute("SELECT journey FROM calls WHERE id = 'c1'").fetchone()[0]
    assert json.loads(text) == {"sse": [{"at": 0.01, "data": "data: [DONE]"}]}


def test_default_call_log_path(monkeypatch, tmp_path):
    monkeypatch.setenv("LIFECYCLE_CALL_LOG", str(tmp_path / "x.sqlite3"))
    assert default_call_log_path() == tmp_path / "x.sqlite3"
    monkeypatch.delenv("LIFECYCLE_CALL_LOG")
    assert default_call_log_path().parts[-3:] == ("share", "llm-request-lifecycle", "calls.sqlite3")


def test_concurrent_updates_of_one_call_lose_no_field(tmp_path):
    changes = {"key_name": "alice", "model": MODEL, "status": 200, "outcome": "ok", "finish_reason": "stop",
               "prompt_tokens": 3, "completion_tokens": 4, "ttft": 0.1, "duration": 0.5, "error": "none"}
    with CallLog(tmp_path / "calls.sqlite3") as log:
        log.record(CallRecord(id="c1"))

        def set_field(name):
            for _ in range(20):
                log.update("c1", **{name: changes[name]})

        threads = [threading.Thread(target=set_field, args=(name,)) for name in changes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stored = log.get("c1")
    assert {name: getattr(stored, name) for name in changes} == changes
    assert stored.total_tokens == 7


def test_retention_keeps_the_newest_rows_and_drops_old_ones(tmp_path):
    with CallLog(tmp_path / "calls.sqlite3", max_rows=5, max_age_seconds=3600) as log:
        log.record(CallRecord(id="ancient", created=time.time() - 7200))
        for n in range(8):
            log.record(CallRecord(id=f"c{n}", created=time.time() + n))
        assert log.count() == 5
        assert [record.id for record in log.recent(10)] == ["c7", "c6", "c5", "c4", "c3"]
        assert log.get("ancient") is None


def test_the_limiter_keeps_a_bounded_number_of_buckets():
    limiter = RateLimiter(2, 10, max_keys=3)
    for address in ("a", "b", "c", "d"):
        limiter.decide(address, 0, now=0)
    assert len(limiter) == 3
    limiter.decide("b", 0, now=0)  # b is used again, so c is the least recently used
    limiter.decide("e", 0, now=0)
    assert len(limiter) == 3 and limiter.decide("b", 0, now=0).allowed is False  # b kept its spent bucket


# --- the Gateway: the three decisions together, on plain data (no HTTP) ----------------------


def _gateway(tmp_path, **limits):
    return Gateway(ApiConfig(keys=KEYS, call_log=tmp_path / "calls.sqlite3", **limits))


def test_gateway_names_the_caller_and_writes_the_auth_step(tmp_path):
    gateway, exchange = _gateway(tmp_path), Exchange("req_a")
    assert gateway.authenticate(f"Bearer {SECRET}", "198.51.100.1", exchange) == "alice"
    assert exchange.key_name == "alice"
    assert [(s["step"], s["outcome"]) for s in exchange.journey["gateway"]] == [("auth", "passed")]


def test_a_stranger_gets_401s_then_a_429_by_address_and_leaves_only_a_count(tmp_path):
    gateway = _gateway(tmp_path, unauthenticated_per_minute=2)
    statuses = []
    for n in range(3):
        exchange = Exchange(f"req_{n}")
        with pytest.raises(ApiError) as caught:
            gateway.authenticate("Bearer sk-wrong", "198.51.100.2", exchange)
        statuses.append(caught.value.status)
        gateway.refuse(exchange, caught.value)
    assert statuses == [401, 401, 429]
    assert caught.value.headers["retry-after"].isdigit()
    assert gateway.refused == {"unauthorized": 2, "rate_limited": 1}
    assert gateway.log.recent(10) == []
    with pytest.raises(ApiError) as other:  # another address has a bucket of its own
        gateway.authenticate(None, "198.51.100.3", Exchange("req_x"))
    assert other.value.status == 401


def test_a_keyed_call_refused_by_its_budget_is_logged_with_its_steps(tmp_path):
    gateway, exchange = _gateway(tmp_path, requests_per_minute=1), Exchange("req_b")
    gateway.authenticate(f"Bearer {SECRET}", "198.51.100.4", exchange)
    assert gateway.rate_limit(exchange, 10)["x-ratelimit-remaining-requests"] == "0"
    with pytest.raises(ApiError) as caught:
        gateway.rate_limit(exchange, 10)
    assert caught.value.status == 429 and caught.value.outcome == "rate_limited"
    exchange.status, exchange.outcome = caught.value.status, caught.value.outcome
    gateway.refuse(exchange, caught.value)
    row = gateway.log.get("req_b")
    assert row is not None and row.key_name == "alice" and row.status == 429
    assert [s["outcome"] for s in row.journey["gateway"]] == ["passed", "passed", "refused"]
    assert not gateway.refused


def test_charging_a_refused_call_never_refuses_it(tmp_path):
    gateway, exchange = _gateway(tmp_path, tokens_per_minute=100), Exchange("req_c")
    gateway.authenticate(f"Bearer {SECRET}", "198.51.100.5", exchange)
    held = gateway.charge(exchange, 60)
    over = gateway.charge(exchange, 60)  # more than is left: noted, not charged, not raised
    assert held["x-ratelimit-remaining-tokens"] == "40"
    assert not any(name.startswith("retry-after") for name in over)
    assert [s["outcome"] for s in exchange.journey["gateway"][1:]] == ["charged", "not charged"]
    assert gateway.limiter.snapshot("alice").tokens == pytest.approx(40, abs=1)


def test_a_failing_log_write_does_not_raise(tmp_path, caplog):
    gateway, exchange = _gateway(tmp_path), Exchange("req_d")
    gateway.log.record = lambda record: (_ for _ in ()).throw(sqlite3.OperationalError("disk full"))
    gateway.save(exchange)
    assert "call log write failed for req_d: OperationalError" in caplog.text
