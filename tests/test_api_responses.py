"""The Responses API (``POST /v1/responses``) through the official openai SDK's ``responses.create``
and ``responses.stream``, sync and async, on the real server and model."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from pydantic import BaseModel

from tests.conftest import run_coroutine
from tests.sdk_server import api_server, base_url, sdk  # noqa: F401 (fixtures)
from tests.test_api import KEY, make_server, serve

QUESTION = "What is the capital of France?"



def test_create_answers_like_the_chat_endpoint(sdk, loaded):
    response = sdk.responses.create(model=loaded.name, input=QUESTION, temperature=0, max_output_tokens=12)
    chat = sdk.chat.completions.create(model=loaded.name, messages=[{"role": "user", "content": QUESTION}],
                                       temperature=0, max_tokens=12)
    assert response.output_text == chat.choices[0].message.content
    assert response.usage.input_tokens == chat.usage.prompt_tokens
    assert response.usage.output_tokens == chat.usage.completion_tokens
    assert response.id.startswith("resp_") and response.object == "response"
    expected = "completed" if chat.choices[0].finish_reason == "stop" else "incomplete"
    assert response.status == expected


def test_usage_counts_the_prompt_tokens_the_prefix_cache_served(sdk, loaded):
    """The same input again: its prefix comes from the engine's cache, and usage says how much (as on
    chat completions), plain and streamed."""
    question = "Which colour is the sky on a clear day?"
    first = sdk.responses.create(model=loaded.name, input=question, temperature=0, max_output_tokens=4)
    again = sdk.responses.create(model=loaded.name, input=question, temperature=0, max_output_tokens=4)
    events = list(sdk.responses.create(model=loaded.name, input=question, temperature=0, max_output_tokens=4,
                                       stream=True))
    streamed = events[-1].response  # response.incomplete at 4 tokens (the SDK's stream helper wants completed)
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert first.usage.input_tokens == again.usage.input_tokens == streamed.usage.input_tokens
    for response in (again, streamed):
        cached = response.usage.input_tokens_details.cached_tokens
        assert 0 < cached < response.usage.input_tokens, response.usage


def test_max_output_tokens_ends_incomplete_with_the_reason(sdk, loaded):
    response = sdk.responses.create(model=loaded.name, input="Tell me a long story.", max_output_tokens=3,
                                    temperature=0)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens == 3


def test_instructions_and_items_input(sdk, loaded):
    items = [{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}]
    with_instructions = sdk.responses.create(model=loaded.name, input=items, instructions="Answer in French.",
                                             temperature=0, max_output_tokens=8)
    plain = sdk.responses.create(model=loaded.name, input=items, temperature=0, max_output_tokens=8)
    assert with_instructions.instructions == "Answer in French."
    assert with_instructions.usage.input_tokens != plain.usage.input_tokens
    assert with_instructions.output_text != plain.output_text


def test_previous_response_id_continues_the_stored_conversation(sdk, loaded):
    first = sdk.responses.create(model=loaded.name, input="My name is Ada.", temperature=0, max_output_tokens=10)
    second = sdk.responses.create(model=loaded.name, input="What is my name?", previous_response_id=first.id,
                                  temperature=0, max_output_tokens=10)
    alone = sdk.responses.create(model=loaded.name, input="What is my name?", temperature=0, max_output_tokens=10)
    assert second.previous_response_id == first.id
    # The second call's prompt holds the first exchange: it is longer by at least the first answer.
    assert second.usage.input_tokens >= alone.usage.input_tokens + first.usage.output_tokens
    unstored = sdk.responses.create(model=loaded.name, input="Hi", store=False, max_output_tokens=2)
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(model=loaded.name, input="Again", previous_response_id=unstored.id, max_output_tokens=2)
    assert caught.value.param == "previous_response_id"


def test_a_stored_response_is_invisible_to_another_key(loaded, tmp_path):
    server = make_server(tmp_path)
    server.config.keys["other"] = "sk-other-" + "z9" * 12
    with serve(server) as url:
        first = OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0).responses.create(
            model=loaded.name, input="Hi", max_output_tokens=2)
        other = OpenAI(base_url=url + "/v1", api_key=server.config.keys["other"], max_retries=0)
        with pytest.raises(openai.BadRequestError):
            other.responses.create(model=loaded.name, input="Hi", previous_response_id=first.id, max_output_tokens=2)


def test_stream_typed_events_assemble_to_the_final_response(sdk, loaded):
    with sdk.responses.stream(model=loaded.name, input=QUESTION, temperature=0, max_output_tokens=12) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert deltas == final.output_text
    whole = sdk.responses.create(model=loaded.name, input=QUESTION, temperature=0, max_output_tokens=12)
    assert final.output_text == whole.output_text


def test_create_with_stream_true_and_logprobs(sdk, loaded):
    events = list(sdk.responses.create(model=loaded.name, input=QUESTION, temperature=0, max_output_tokens=5,
                                       stream=True, include=["message.output_text.logprobs"], top_logprobs=2))
    done = [event for event in events if event.type == "response.output_text.done"][0]
    assert len(done.logprobs) == 5
    assert all(len(entry.top_logprobs) == 2 for entry in done.logprobs)


def test_output_text_logprobs_hold_exactly_its_tokens_plain_and_streamed(sdk, loaded):
    """The end-of-sequence token the model ended with counts in output_tokens, but has no entry."""
    fields = dict(model=loaded.name, input=QUESTION, temperature=0, max_output_tokens=64,
                  include=["message.output_text.logprobs"], top_logprobs=1)
    response = sdk.responses.create(**fields)
    assert response.status == "completed" and response.output_text
    tokens = [entry.token for entry in response.output[0].content[0].logprobs]
    assert "".join(tokens) == response.output_text
    assert response.usage.output_tokens == len(tokens) + 1
    events = list(sdk.responses.create(**fields, stream=True))
    deltas = [entry.token for e in events if e.type == "response.output_text.delta" for entry in e.logprobs]
    done = [e for e in events if e.type == "response.output_text.done"][0]
    assert deltas == [entry.token for entry in done.logprobs] == tokens


@pytest.mark.parametrize("fields,param", [
    ({"background": True}, "background"),
    ({"reasoning": {"effort": "low"}}, "reasoning"),
    ({"truncation": "auto"}, "truncation"),
    ({"max_output_token": 5}, "max_output_token"),
    ({"input": []}, "input"),
    ({"temperature": 3}, "temperature"),
    ({"tools": [{"type": "web_search"}]}, "tools"),
])
def test_bad_or_unsupported_fields_are_400_naming_them(base_url, loaded, fields, param):
    body = {"model": loaded.name, "input": "Hi", **fields}
    raw = httpx.post(f"{base_url}/responses", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    assert raw.status_code == 400
    assert raw.json()["error"]["param"] == param


def test_async_create_and_stream(base_url, loaded):
    async def main():
        async with AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=120) as client:
            created = await client.responses.create(model=loaded.name, input=QUESTION, temperature=0,
                                                    max_output_tokens=16)
            async with client.responses.stream(model=loaded.name, input=QUESTION, temperature=0,
                                               max_output_tokens=16) as stream:
                async for _ in stream:
                    pass
                final = await stream.get_final_response()
            return created, final

    created, final = run_coroutine(main())
    assert created.output_text == final.output_text != ""


class City(BaseModel):
    name: str
    country: str


def test_parse_with_a_pydantic_model_through_text_format(sdk, loaded):
    parsed = sdk.responses.parse(model=loaded.name, input="Name one big city and its country, as JSON.",
                                 text_format=City, temperature=0, max_output_tokens=60)
    assert parsed.status == "completed"
    assert isinstance(parsed.output_parsed, City)
    assert parsed.output_parsed == City.model_validate_json(parsed.output_text)
    assert parsed.text.format.type == "json_schema" and parsed.text.format.name == "City"


def test_json_object_format_answers_json(sdk, loaded):
    response = sdk.responses.create(model=loaded.name, input="Return a JSON object about the weather.",
                                    text={"format": {"type": "json_object"}}, temperature=0, max_output_tokens=120)
    assert response.status == "completed"
    assert isinstance(json.loads(response.output_text), dict)


WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "The current weather in a city.",
                "strict": True, "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                               "required": ["city"], "additionalProperties": False}}
WEATHER_QUESTION = "What is the weather in Paris?"


def _function_call(response):
    assert [item.type for item in response.output] == ["function_call"]
    return response.output[0]


def test_a_required_tool_call_is_a_function_call_item(sdk, loaded):
    response = sdk.responses.create(model=loaded.name, input=WEATHER_QUESTION, tools=[WEATHER_TOOL],
                                    tool_choice="required", temperature=0, max_output_tokens=40)
    call = _function_call(response)
    assert call.name == "get_weather" and call.status == "completed" and response.status == "completed"
    assert call.id.startswith("fc_") and call.call_id.startswith("call_")
    arguments = json.loads(call.arguments)
    assert list(arguments) == ["city"] and isinstance(arguments["city"], str)
    assert response.output_text == ""
    assert response.tool_choice == "required" and response.tools[0].name == "get_weather"
    assert response.parallel_tool_calls is True  # OpenAI's default, echoed


def test_parallel_tool_calls_is_echoed_as_sent(sdk, loaded):
    response = sdk.responses.create(model=loaded.name, input=WEATHER_QUESTION, tools=[WEATHER_TOOL],
                                    tool_choice="required", parallel_tool_calls=False, temperature=0,
                                    max_output_tokens=40)
    assert response.parallel_tool_calls is False and len(response.output) == 1


def test_the_tool_result_goes_back_with_previous_response_id(sdk, loaded):
    first = sdk.responses.create(model=loaded.name, input=WEATHER_QUESTION, tools=[WEATHER_TOOL],
                                 tool_choice={"type": "function", "name": "get_weather"}, temperature=0,
                                 max_output_tokens=40)
    call = _function_call(first)
    second = sdk.responses.create(
        model=loaded.name, previous_response_id=first.id, tools=[WEATHER_TOOL], temperature=0, max_output_tokens=24,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"}],
    )
    assert [item.type for item in second.output] == ["message"]
    assert second.output_text.strip()
    # the stored conversation (question and call) plus the result: more input than the question alone
    assert second.usage.input_tokens > first.usage.input_tokens
    resent = sdk.responses.create(model=loaded.name, tools=[WEATHER_TOOL], temperature=0, max_output_tokens=24, input=[
        {"role": "user", "content": WEATHER_QUESTION},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"},
    ])
    assert resent.output_text == second.output_text
    assert resent.usage.input_tokens == second.usage.input_tokens


def test_a_streamed_call_reassembles_its_arguments(sdk, loaded):
    with sdk.responses.stream(model=loaded.name, input=WEATHER_QUESTION, tools=[WEATHER_TOOL],
                              tool_choice="required", temperature=0, max_output_tokens=40) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-3:] == ["response.function_call_arguments.done", "response.output_item.done",
                          "response.completed"]
    assert set(kinds[3:-3]) == {"response.function_call_arguments.delta"}
    added, done = events[2].item, events[-2].item
    assert added.type == "function_call" and added.arguments == "" and added.status == "in_progress"
    deltas = [event for event in events if event.type == "response.function_call_arguments.delta"]
    assert {event.item_id for event in deltas} == {added.id} and {event.output_index for event in deltas} == {0}
    arguments = "".join(event.delta for event in deltas)
    assert arguments == events[-3].arguments == done.arguments == _function_call(final).arguments
    assert (done.id, done.call_id, done.name) == (added.id, added.call_id, "get_weather")
    whole = sdk.responses.create(model=loaded.name, input=WEATHER_QUESTION, tools=[WEATHER_TOOL],
                                 tool_choice="required", temperature=0, max_output_tokens=40)
    assert json.loads(arguments) == json.loads(_function_call(whole).arguments)
