"""The API through the official openai Python SDK: answers, streams, usage, and every error class."""

from __future__ import annotations

import math
import time

import openai
import pytest
from openai import OpenAI

from lifecycle.stages import generation as generate_module
from lifecycle.stages import streaming
from tests.sdk_server import api_server, base_url  # noqa: F401  (fixtures: this module's own server)
from tests.test_api import KEY, make_server, serve

HELLO = [{"role": "user", "content": "Name a colour."}]


def client(base_url: str, key: str = KEY, retries: int = 0) -> OpenAI:
    return OpenAI(base_url=base_url, api_key=key, max_retries=retries, timeout=120)


def row_for(api_server, request_id: str):
    row = api_server.gateway.log.get(request_id)
    assert row is not None, request_id
    return row


def test_non_streamed_and_streamed_answers_agree_at_temperature_0(base_url, api_server, loaded):
    sdk = client(base_url)
    raw = sdk.chat.completions.with_raw_response.create(
        model=loaded.name, messages=HELLO, max_tokens=8, temperature=0, seed=1
    )
    answer = raw.parse()
    assert answer.object == "chat.completion" and answer.model == loaded.name
    text = answer.choices[0].message.content
    assert text and answer.choices[0].finish_reason in ("stop", "length")
    usage = answer.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens and 0 < usage.completion_tokens <= 8
    row = row_for(api_server, raw.headers["x-request-id"])
    assert (row.outcome, row.completion_tokens, row.finish_reason) == ("ok", usage.completion_tokens,
                                                                      answer.choices[0].finish_reason)
    assert row.journey["completion_id"] == answer.id

    stream = sdk.chat.completions.create(
        model=loaded.name, messages=HELLO, max_tokens=8, temperature=0, seed=1,
        stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert len({c.id for c in chunks}) == 1 and chunks[0].id != answer.id
    assert chunks[0].choices[0].delta.role == "assistant" and not chunks[0].choices[0].delta.content
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    # The same prompt again: its prefix comes from the engine's cache, and usage says how much.
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump(exclude={"prompt_tokens_details"}) == \
        usage.model_dump(exclude={"prompt_tokens_details"})
    assert 0 < chunks[-1].usage.prompt_tokens_details.cached_tokens < usage.prompt_tokens
    assert [c.usage for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    finishing = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishing == [answer.choices[0].finish_reason]
    stream_row = row_for(api_server, stream.response.headers["x-request-id"])
    assert stream_row.completion_tokens == usage.completion_tokens and stream_row.outcome == "ok"


def test_models_list(base_url, loaded):
    assert [m.id for m in client(base_url).models.list()] == [loaded.name]


def test_bad_key_is_authentication_error_not_retried(base_url, api_server, loaded):
    with pytest.raises(openai.AuthenticationError) as caught:
        client(base_url, key="sk-not-a-key", retries=2).chat.completions.create(model=loaded.name, messages=HELLO)
    assert caught.value.code == "invalid_api_key"
    assert api_server.gateway.log.get(caught.value.request_id) is None  # only counted: nothing stored without a key
    before = api_server.gateway.refused["unauthorized"]
    with pytest.raises(openai.AuthenticationError):
        client(base_url, key="sk-not-a-key", retries=2).chat.completions.create(model=loaded.name, messages=HELLO)
    assert api_server.gateway.refused["unauthorized"] == before + 1, "a 401 is not retried"


@pytest.mark.parametrize(
    "fields, param",
    [({"temperature": 2.5}, "temperature"), ({"top_p": 0}, "top_p"), ({"max_tokens": 0}, "max_tokens"),
     ({"messages": []}, "messages"), ({"extra_body": {"top_k": -2}}, "top_k")],
)
def test_invalid_parameters_are_bad_request_errors(base_url, api_server, loaded, fields, param):
    arguments = {"model": loaded.name, "messages": HELLO} | fields
    with pytest.raises(openai.BadRequestError) as caught:
        client(base_url, retries=2).chat.completions.create(**arguments)
    assert caught.value.param == param
    assert row_for(api_server, caught.value.request_id).status == 400


def test_context_length_exceeded_is_bad_request_even_when_streaming(base_url, loaded):
    with pytest.raises(openai.BadRequestError) as caught:
        client(base_url).chat.completions.create(
            model=loaded.name, messages=HELLO, max_tokens=loaded.context_window, stream=True
        )
    assert caught.value.code == "context_length_exceeded"


def _rows_since(server, started: float) -> list:
    return [r for r in server.gateway.log.recent(20) if r.created >= started]


@pytest.mark.parametrize("size", ["300 KB", "just over the window"])
def test_a_prompt_that_never_fits_is_400_even_when_the_key_budget_is_spent(loaded, tmp_path, size):
    """Not a 429: no wait makes it fit, and the SDKs retry a 429 (here: default retries, one call)."""
    server = make_server(tmp_path)
    text = "hello " * 50_000 if size == "300 KB" else "hello" + " hello" * (loaded.context_window + 50)
    messages = [{"role": "user", "content": text}]
    with serve(server) as url:
        assert server.gateway.limiter.decide("tester", server.gateway.limiter.tokens_per_minute).allowed  # the minute's budget is gone
        started = time.time()
        with pytest.raises(openai.BadRequestError) as caught:
            client(url + "/v1").chat.completions.create(model=loaded.name, messages=messages, max_tokens=4)
        assert caught.value.code == "context_length_exceeded" and caught.value.param == "messages"
        assert "retry-after" not in caught.value.response.headers
        with pytest.raises(openai.BadRequestError):
            OpenAI(base_url=url + "/v1", api_key=KEY, timeout=120).chat.completions.create(
                model=loaded.name, messages=messages, max_tokens=4)  # the SDK's default retries
        rows = _rows_since(server, started)
        assert [(r.status, r.outcome) for r in rows] == [(400, "invalid_request")] * 2
        steps = [(step["step"], step["outcome"]) for step in rows[0].journey["gateway"]]
        assert ("rate limit", "not charged") in steps  # the spent budget could not hold it: nothing refused it


def test_a_request_over_the_whole_minute_budget_is_400_and_429_only_when_waiting_helps(loaded, tmp_path):
    server = make_server(tmp_path, tokens_per_minute=200)
    with serve(server) as url:
        started = time.time()
        with pytest.raises(openai.BadRequestError) as caught:
            OpenAI(base_url=url + "/v1", api_key=KEY, timeout=120).chat.completions.create(
                model=loaded.name, messages=HELLO, max_tokens=300)  # the SDK's default retries
        assert caught.value.code == "request_too_large" and "200 tokens per minute" in caught.value.message
        assert "retry-after" not in caught.value.response.headers
        assert [r.status for r in _rows_since(server, started)] == [400]
        # Greedy: sampled at the default temperature, two tokens can decode to no text yet (a special token, or the
        # first bytes of a character the answer holds back): content "" with finish_reason "length", seen once.
        answer = client(url + "/v1").chat.completions.create(model=loaded.name, messages=HELLO, max_tokens=2,
                                                             temperature=0)
        assert answer.choices[0].message.content  # the same key, a request the minute's budget holds
        assert answer.usage.prompt_tokens + 150 <= 200  # so the next one fits a full bucket
        assert server.gateway.limiter.decide("tester", math.floor(server.gateway.limiter.snapshot("tester").tokens)).allowed
        with pytest.raises(openai.RateLimitError) as refused:  # the bucket is empty but refills: waiting helps
            client(url + "/v1").chat.completions.create(model=loaded.name, messages=HELLO, max_tokens=150)
        assert refused.value.code == "rate_limit_exceeded"
        assert int(refused.value.response.headers["retry-after"]) >= 1


def test_unknown_model_is_not_found_error(base_url, api_server):
    with pytest.raises(openai.NotFoundError) as caught:
        client(base_url).chat.completions.create(model="gpt-4o", messages=HELLO)
    assert caught.value.code == "model_not_found"
    assert row_for(api_server, caught.value.request_id).status == 404


def test_rate_limit_is_429_with_retry_after_and_the_sdk_retry_succeeds(loaded, tmp_path):
    server = make_server(tmp_path, requests_per_minute=60)
    with serve(server) as url:
        # Other traffic from the same key has used this minute's whole burst.
        for _ in range(60):
            assert server.gateway.limiter.decide("tester", 0).allowed
        with pytest.raises(openai.RateLimitError) as caught:
            client(url + "/v1").chat.completions.create(model=loaded.name, messages=HELLO, max_tokens=2)
        headers = caught.value.response.headers
        assert int(headers["retry-after"]) >= 1 and headers["x-ratelimit-remaining-requests"] == "0"
        assert row_for(server, caught.value.request_id).outcome == "rate_limited"

        for _ in range(60):
            server.gateway.limiter.decide("tester", 0)
        started = time.time()
        answer = client(url + "/v1", retries=2).chat.completions.with_raw_response.create(
            model=loaded.name, messages=HELLO, max_tokens=2, temperature=0
        )
        assert answer.parse().choices[0].message.content
        rows = [r for r in server.gateway.log.recent(10) if r.created >= started]
        assert [r.status for r in sorted(rows, key=lambda r: r.created)] == [429, 200]
        refused, served = sorted(rows, key=lambda r: r.created)
        assert served.id == answer.headers["x-request-id"]
        wait = int(refused.journey["response"]["headers"]["retry-after-ms"]) / 1000
        assert served.created - refused.created >= wait, "the SDK waited as told before retrying"


def test_failure_mid_stream_is_an_error_event_and_an_api_error(base_url, api_server, loaded, monkeypatch):
    real = generate_module.generate_steps

    def failing_steps(*args, **kwargs):
        for index, step in enumerate(real(*args, **kwargs)):
            if index == 2:
                raise RuntimeError("injected failure")
            yield step

    monkeypatch.setattr(generate_module, "generate_steps", failing_steps)
    stream = client(base_url).chat.completions.create(model=loaded.name, messages=HELLO, max_tokens=8, stream=True)
    with pytest.raises(openai.APIError) as caught:
        list(stream)
    assert caught.value.message == "Generation failed: RuntimeError."  # the exception's text stays inside
    row = row_for(api_server, stream.response.headers["x-request-id"])
    assert row.outcome == "error" and row.error == "Generation failed: RuntimeError."
    assert row.journey["frames"][-1]["sse"] == "data: [DONE]\n\n"
