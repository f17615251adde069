"""Every accepted chat-completions parameter takes effect, seen through the official openai SDK
(sync and async) against the real server and model: logprobs, penalties, logit_bias, n, seed,
metadata fields, unknown fields, and ``message.refusal``."""

from __future__ import annotations

import asyncio
import collections
import math

import openai
import pytest
from openai import AsyncOpenAI

from lifecycle.stages import streaming
from tests.conftest import run_coroutine
from tests.sdk_server import api_server, base_url, sdk  # noqa: F401 (fixtures)
from tests.test_api import KEY

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
REPEAT = [{"role": "user", "content": "List the days of the week, each one twice."}]



def greedy(sdk, loaded, messages, **fields):
    return sdk.chat.completions.create(model=loaded.name, messages=messages, temperature=0, **fields)


def test_logprobs_in_openais_shape(sdk, loaded):
    response = greedy(sdk, loaded, CAPITAL, max_tokens=6, logprobs=True, top_logprobs=3)
    choice = response.choices[0]
    content = choice.logprobs.content
    assert len(content) == response.usage.completion_tokens == 6
    assert b"".join(bytes(entry.bytes) for entry in content).decode("utf-8") == choice.message.content
    for entry in content:
        assert len(entry.top_logprobs) == 3
        alternatives = [alt.logprob for alt in entry.top_logprobs]
        assert alternatives == sorted(alternatives, reverse=True)
        assert entry.logprob == alternatives[0]  # greedy: the chosen token is the model's most likely
        assert sum(math.exp(lp) for lp in alternatives) <= 1.0 + 1e-9
        assert entry.token == bytes(entry.bytes).decode("utf-8")


def test_logprobs_without_top_logprobs_and_off_by_default(sdk, loaded):
    plain = greedy(sdk, loaded, CAPITAL, max_tokens=3)
    assert plain.choices[0].logprobs is None
    bare = greedy(sdk, loaded, CAPITAL, max_tokens=3, logprobs=True)
    assert [entry.top_logprobs for entry in bare.choices[0].logprobs.content] == [[], [], []]


def test_streamed_logprobs_match_the_json_ones(sdk, loaded):
    whole = greedy(sdk, loaded, CAPITAL, max_tokens=8, logprobs=True, top_logprobs=2)
    chunks = list(greedy(sdk, loaded, CAPITAL, max_tokens=8, logprobs=True, top_logprobs=2, stream=True))
    streamed = [entry for chunk in chunks for choice in chunk.choices if choice.logprobs
                for entry in choice.logprobs.content]
    assert [(e.token, e.logprob, e.bytes) for e in streamed] == [
        (e.token, e.logprob, e.bytes) for e in whole.choices[0].logprobs.content
    ]
    assert all(len(e.top_logprobs) == 2 for e in streamed)


def test_logprobs_hold_exactly_the_tokens_of_the_content_plain_and_streamed(sdk, loaded):
    """A generation the model ends itself: its end-of-sequence token is counted in usage (as vLLM
    counts it) but has no logprobs entry, so the tokens join into the message, streamed or not."""
    eos = loaded.tokenizer.convert_ids_to_tokens(loaded.eos_token_id)
    whole = greedy(sdk, loaded, CAPITAL, max_tokens=64, logprobs=True, top_logprobs=2)
    choice = whole.choices[0]
    assert choice.finish_reason == "stop" and choice.message.content
    tokens = [entry.token for entry in choice.logprobs.content]
    assert "".join(tokens) == choice.message.content and eos not in tokens
    assert whole.usage.completion_tokens == len(tokens) + 1

    chunks = list(greedy(sdk, loaded, CAPITAL, max_tokens=64, logprobs=True, top_logprobs=2, stream=True,
                         stream_options={"include_usage": True}))
    streamed = [entry.token for chunk in chunks for c in chunk.choices if c.logprobs for entry in c.logprobs.content]
    text = "".join(c.delta.content or "" for chunk in chunks for c in chunk.choices)
    assert text == choice.message.content and "".join(streamed) == text and streamed == tokens
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def _most_repeated(response) -> int:
    tokens = [entry.token for entry in response.choices[0].logprobs.content]
    return collections.Counter(tokens).most_common(1)[0][1]


@pytest.mark.parametrize("penalty", ["frequency_penalty", "presence_penalty"])
def test_penalties_change_a_repetitive_answer(sdk, loaded, penalty):
    plain = greedy(sdk, loaded, REPEAT, max_tokens=24, logprobs=True)
    penalised = greedy(sdk, loaded, REPEAT, max_tokens=24, logprobs=True, **{penalty: 2.0})
    assert penalised.choices[0].message.content != plain.choices[0].message.content
    assert _most_repeated(penalised) < _most_repeated(plain)


def test_logit_bias_bans_and_forces_tokens(sdk, loaded):
    plain = greedy(sdk, loaded, CAPITAL, max_tokens=4, logprobs=True)
    first = plain.choices[0].logprobs.content[0].token
    (first_id,) = loaded.tokenizer.encode(first, add_special_tokens=False)
    banned = greedy(sdk, loaded, CAPITAL, max_tokens=4, logprobs=True, logit_bias={str(first_id): -100})
    assert banned.choices[0].logprobs.content[0].token != first
    (forced_id,) = loaded.tokenizer.encode(" banana", add_special_tokens=False)
    forced = greedy(sdk, loaded, CAPITAL, max_tokens=3, logit_bias={str(forced_id): 100})
    assert forced.choices[0].message.content.startswith(" banana banana")


def test_logit_bias_with_an_unknown_token_id_is_refused_before_any_work(sdk, loaded):
    with pytest.raises(openai.BadRequestError) as caught:
        greedy(sdk, loaded, CAPITAL, max_tokens=4, logit_bias={str(loaded.vocab_size): 5})
    assert caught.value.param == "logit_bias"


def test_n_choices_json(sdk, loaded):
    response = sdk.chat.completions.create(model=loaded.name, messages=CAPITAL, n=3, max_tokens=6, seed=11,
                                           temperature=1.2)
    assert [choice.index for choice in response.choices] == [0, 1, 2]
    assert len({choice.message.content for choice in response.choices}) > 1
    again = sdk.chat.completions.create(model=loaded.name, messages=CAPITAL, n=3, max_tokens=6, seed=11,
                                        temperature=1.2)
    assert [c.message.content for c in again.choices] == [c.message.content for c in response.choices]
    assert response.usage.completion_tokens == 18


def test_n_choices_stream_with_their_indexes(sdk, loaded, base_url):
    import httpx

    body = {"model": loaded.name, "messages": CAPITAL, "n": 2, "max_tokens": 5, "seed": 3, "temperature": 1.0,
            "stream": True, "stream_options": {"include_usage": True}}
    raw = httpx.post(f"{base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"},
                     timeout=120)
    chunks = streaming.parse_sse(raw.text)
    assert streaming.stream_problems(chunks) == []
    assert {choice["index"] for chunk in chunks for choice in chunk["choices"]} == {0, 1}
    whole = sdk.chat.completions.create(model=loaded.name, messages=CAPITAL, n=2, max_tokens=5, seed=3,
                                        temperature=1.0)
    for index in (0, 1):
        text, finish, usage = streaming.assemble(chunks, index)
        assert text == whole.choices[index].message.content
        assert finish == whole.choices[index].finish_reason
    assert usage["completion_tokens"] == whole.usage.completion_tokens


def test_seed_makes_sampling_repeatable(sdk, loaded):
    runs = [sdk.chat.completions.create(model=loaded.name, messages=CAPITAL, max_tokens=8, temperature=1.5, seed=seed)
            .choices[0].message.content for seed in (5, 5, 6)]
    assert runs[0] == runs[1] != runs[2]


def test_refusal_is_null_in_every_choice(sdk, loaded):
    raw = sdk.chat.completions.with_raw_response.create(model=loaded.name, messages=CAPITAL, max_tokens=2, n=2)
    body = raw.http_response.json()
    assert [choice["message"]["refusal"] for choice in body["choices"]] == [None, None]
    assert raw.parse().choices[0].message.refusal is None


def test_user_metadata_store_are_recorded_with_the_call(sdk, loaded, api_server):
    raw = sdk.chat.completions.with_raw_response.create(
        model=loaded.name, messages=CAPITAL, max_tokens=2, user="learner-7", metadata={"workshop": "day 1"},
        store=False,
    )
    row = api_server.gateway.log.get(raw.http_response.headers["x-request-id"])
    assert row.journey["metadata"] == {"user": "learner-7", "metadata": {"workshop": "day 1"}, "store": False}


@pytest.mark.parametrize("extra,param", [
    ({"max_token": 5}, "max_token"),
    ({"reasoning_effort": "low"}, "reasoning_effort"),
    ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
])
def test_unknown_and_unsupported_fields_are_400_naming_them(sdk, loaded, extra, param):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model=loaded.name, messages=CAPITAL, max_tokens=2, extra_body=extra)
    assert caught.value.param == param
    assert param in caught.value.message


def test_async_client_gets_logprobs_and_n(base_url, loaded):
    async def main():
        async with AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=120) as client:
            calls = [client.chat.completions.create(model=loaded.name, messages=CAPITAL, max_tokens=4, temperature=0,
                                                    logprobs=True, top_logprobs=1, n=2) for _ in range(2)]
            return await asyncio.gather(*calls)

    for response in run_coroutine(main()):
        assert len(response.choices) == 2
        assert response.choices[0].message.content == response.choices[1].message.content  # greedy
        assert all(len(choice.logprobs.content) == 4 for choice in response.choices)
