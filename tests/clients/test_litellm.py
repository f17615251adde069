"""The API through litellm's OpenAI-compatible provider (``model="openai/<name>"``): answers, streams,
usage, and its error classes."""

from __future__ import annotations

import json

import pytest

from tests.clients.expected import GreedyAnswer, greedy_answer, text_stream_kinds
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
    before = api_server.gateway.refused["unauthorized"]
    with pytest.raises(litellm.AuthenticationError) as caught:
        complete(litellm, base_url, loaded, key="sk-not-a-key", max_retries=2)
    assert caught.value.status_code == 401
    assert api_server.gateway.refused["unauthorized"] == before + 1, "a 401 is not retried"


@pytest.mark.parametrize("stream", [False, True])
def test_too_long_prompt_is_context_window_exceeded_not_a_retried_429(litellm, base_url, api_server, loaded, stream):
    text = "hello" + " hello" * (loaded.context_window + 50)
    before = len(api_server.gateway.log.recent(500))
    with pytest.raises(litellm.ContextWindowExceededError) as caught:
        response = complete(litellm, base_url, loaded, messages=[{"role": "user", "content": text}], max_tokens=4,
                            max_retries=2, stream=stream)
        if stream:
            list(response)
    assert isinstance(caught.value, litellm.BadRequestError) and caught.value.status_code == 400
    rows = api_server.gateway.log.recent(500)
    assert len(rows) == before + 1, "one call, not retried"
    assert max(rows, key=lambda r: r.created).status == 400


def test_unknown_model_is_not_found(litellm, base_url, loaded):
    with pytest.raises(litellm.NotFoundError) as caught:
        litellm.completion(model="openai/gpt-4o", api_base=base_url, api_key=KEY, messages=QUESTION, max_retries=0)
    assert caught.value.status_code == 404



# --- the Responses API: litellm.responses ---------------------------------------------------------------------

ITALY = "What is the capital of Italy?"


@pytest.fixture(scope="module")
def italy(loaded) -> GreedyAnswer:
    return greedy_answer(loaded, ITALY, 32)


def respond(litellm, base_url, loaded, **kwargs):
    settings = {"input": ITALY, "max_output_tokens": 32, "temperature": 0, "max_retries": 0, "timeout": 120} | kwargs
    return litellm.responses(model=f"openai/{loaded.name}", api_base=base_url, api_key=KEY, **settings)


def test_responses_plain_and_streamed_report_the_tokenizers_counts(litellm, base_url, api_server, loaded, italy):
    assert italy.status == "completed", "the question must end before max_output_tokens"
    plain = respond(litellm, base_url, loaded)
    assert plain.id.startswith("resp_") and plain.status == "completed"
    assert plain.output[0].content[0].text == italy.text
    assert (plain.usage.input_tokens, plain.usage.output_tokens) == (italy.prompt_tokens, italy.output_tokens)
    assert plain.usage.total_tokens == italy.prompt_tokens + italy.output_tokens

    events = list(respond(litellm, base_url, loaded, stream=True))
    kinds = [event.type for event in events]
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert kinds == text_stream_kinds(len(deltas), "response.completed") and len(deltas) > 1
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert "".join(deltas) == italy.text
    done = events[-1].response
    assert done.output[0].content[0].text == italy.text
    assert (done.usage.input_tokens, done.usage.output_tokens) == (italy.prompt_tokens, italy.output_tokens)
    # The streamed call repeated the plain one's prompt: the prefix cache served all of it but the last token.
    assert done.usage.input_tokens_details.cached_tokens == italy.cache_serves_on_a_repeat
    assert plain.usage.input_tokens_details.cached_tokens <= italy.cache_serves_on_a_repeat


def test_responses_max_output_tokens_below_16_is_raised_to_16_by_litellm(litellm, base_url, api_server, loaded):
    """litellm 1.110 lifts max_output_tokens under 16 to 16 before sending (OpenAI's Responses API refuses
    values below 16 with integer_below_min_value): the server generated and counted what it was sent."""
    story = "Tell me a long story."
    expected = greedy_answer(loaded, story, 16)
    assert expected.status == "incomplete"
    answer = respond(litellm, base_url, loaded, input=story, max_output_tokens=8)
    row = max(api_server.gateway.log.recent(50), key=lambda r: r.created)
    assert json.loads(row.journey["request"]["body"])["max_output_tokens"] == 16  # what litellm sent
    assert answer.status == "incomplete" and answer.incomplete_details.reason == "max_output_tokens"
    assert answer.usage.output_tokens == row.completion_tokens == expected.output_tokens == 16
    assert answer.output[0].content[0].text == expected.text
