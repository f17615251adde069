"""The API through litellm's OpenAI-compatible provider (``model="openai/<name>"``): answers, streams,
usage, and its error classes."""

from __future__ import annotations

import pytest

from tests.sdk_server import api_server, base_url  # noqa: F401  (fixtures: this module's own server)
from tests.test_api import KEY

QUESTION = [{"role": "user", "content": "Name a colour."}]


@pytest.fixture(scope="module")
def litellm():
    """litellm imported with its bundled model-price map: by default its import fetches the map from
    the network (the loopback guard would fail the test)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        patch.setenv("LITELLM_TELEMETRY", "False")
        import litellm

        yield litellm


def complete(litellm, base_url, loaded, key=KEY, **kwargs):
    settings = {"messages": QUESTION, "max_tokens": 8, "temperature": 0, "seed": 1, "max_retries": 0,
                "timeout": 120} | kwargs
    return litellm.completion(model=f"openai/{loaded.name}", api_base=base_url, api_key=key, **settings)


def test_plain_and_streamed_answers_agree_with_usage(litellm, base_url, api_server, loaded):
    answer = complete(litellm, base_url, loaded)
    choice = answer.choices[0]
    assert choice.message.content and choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length")
    assert answer.id.startswith("chatcmpl-")
    usage = answer.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert 0 < usage.completion_tokens <= 8 and usage.prompt_tokens > 0

    chunks = list(complete(litellm, base_url, loaded, stream=True, stream_options={"include_usage": True}))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1 and "".join(pieces) == choice.message.content
    finishing = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishing == [choice.finish_reason]
    streamed_usage = [c.usage for c in chunks if getattr(c, "usage", None)]
    assert streamed_usage, "the usage chunk reached the caller"
    last = streamed_usage[-1]
    assert (last.prompt_tokens, last.completion_tokens, last.total_tokens) == \
        (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)

    # litellm's own reassembly of the chunks: the same text and usage as the plain answer.
    rebuilt = litellm.stream_chunk_builder(chunks, messages=QUESTION)
    assert rebuilt.choices[0].message.content == choice.message.content
    assert rebuilt.usage.completion_tokens == usage.completion_tokens
    assert rebuilt.usage.prompt_tokens == usage.prompt_tokens


def test_async_stream(litellm, base_url, loaded):
    from tests.conftest import run_coroutine

    async def collect():
        stream = await litellm.acompletion(model=f"openai/{loaded.name}", api_base=base_url, api_key=KEY,
                                           messages=QUESTION, max_tokens=8, temperature=0, seed=1, stream=True,
                                           max_retries=0)
        return [chunk async for chunk in stream]

    chunks = run_coroutine(collect())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == complete(litellm, base_url, loaded).choices[0].message.content


def test_logprobs_join_into_the_content(litellm, base_url, loaded):
    answer = complete(litellm, base_url, loaded, logprobs=True, top_logprobs=2)
    content = answer.choices[0].logprobs["content"] if isinstance(answer.choices[0].logprobs, dict) \
        else answer.choices[0].logprobs.content
    tokens = [entry["token"] if isinstance(entry, dict) else entry.token for entry in content]
    assert "".join(tokens) == answer.choices[0].message.content
    for entry in content:
        logprob = entry["logprob"] if isinstance(entry, dict) else entry.logprob
        top = entry["top_logprobs"] if isinstance(entry, dict) else entry.top_logprobs
        assert logprob <= 0 and len(top) == 2


def test_wrong_key_is_litellms_authentication_error(litellm, base_url, api_server, loaded):
    before = api_server.refused["unauthorized"]
    with pytest.raises(litellm.AuthenticationError) as caught:
        complete(litellm, base_url, loaded, key="sk-not-a-key", max_retries=2)
    assert caught.value.status_code == 401
    assert api_server.refused["unauthorized"] == before + 1, "a 401 is not retried"


@pytest.mark.parametrize("stream", [False, True])
def test_too_long_prompt_is_context_window_exceeded_not_a_retried_429(litellm, base_url, api_server, loaded, stream):
    text = "hello" + " hello" * (loaded.context_window + 50)
    before = len(api_server.log.recent(500))
    with pytest.raises(litellm.ContextWindowExceededError) as caught:
        response = complete(litellm, base_url, loaded, messages=[{"role": "user", "content": text}], max_tokens=4,
                            max_retries=2, stream=stream)
        if stream:
            list(response)
    assert isinstance(caught.value, litellm.BadRequestError) and caught.value.status_code == 400
    rows = api_server.log.recent(500)
    assert len(rows) == before + 1, "one call, not retried"
    assert max(rows, key=lambda r: r.created).status == 400


def test_unknown_model_is_not_found(litellm, base_url, loaded):
    with pytest.raises(litellm.NotFoundError) as caught:
        litellm.completion(model="openai/gpt-4o", api_base=base_url, api_key=KEY, messages=QUESTION, max_retries=0)
    assert caught.value.status_code == 404

