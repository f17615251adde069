"""Structured output and tools through the official openai SDK: a tool-call round trip, streamed
argument fragments, ``parse`` with a Pydantic model, and 400s naming the parameter before any
model work."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel

from tests.sdk_server import api_server, base_url  # noqa: F401  (fixtures: this module's own server)
from tests.test_api import KEY
from tests.test_tools import TIME, WEATHER

QUESTION = [{"role": "user", "content": "What's the weather in Paris?"}]


class City(BaseModel):
    name: str
    country: str
    population: int


@pytest.fixture(scope="module")
def sdk(base_url):
    return OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=300)


def test_tool_call_round_trip(sdk, loaded, api_server):
    first = sdk.chat.completions.create(model=loaded.name, messages=QUESTION, tools=[WEATHER, TIME],
                                        tool_choice="required", temperature=0)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_") and call.function.name in ("get_weather", "get_time")
    arguments = json.loads(call.function.arguments)
    assert isinstance(arguments, dict) and arguments

    result = {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 18, "sky": "cloudy"})}
    messages = QUESTION + [choice.message.model_dump(exclude_none=True), result]
    second = sdk.chat.completions.create(model=loaded.name, messages=messages, tools=[WEATHER, TIME],
                                         tool_choice="none", temperature=0, max_tokens=40)
    answer = second.choices[0]
    assert answer.message.tool_calls is None and answer.message.content
    assert answer.finish_reason in ("stop", "length")
    # the call and the tool result were in the prompt the model read
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + 10


# A plain tool as a new user writes one: no "additionalProperties", so JSON Schema's default would
# admit any extra key. On this question the model, forced to call, copies the schema it was shown
# into the arguments ({"city": "London", "properties": {"type": "string", ...}}) unless the grammar
# holds the arguments to the declared properties.
PLAIN_WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.mark.parametrize("stream", [False, True])
def test_a_plain_tools_arguments_hold_only_its_declared_properties(sdk, loaded, stream):
    kwargs = dict(model=loaded.name, messages=[{"role": "user", "content": "Is it raining in London right now?"}],
                  tools=[PLAIN_WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}},
                  temperature=0, max_tokens=60)
    if stream:
        with sdk.chat.completions.stream(**kwargs) as events:
            choice = events.get_final_completion().choices[0]
    else:
        choice = sdk.chat.completions.create(**kwargs).choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    arguments = json.loads(call.function.arguments)  # complete JSON
    declared = PLAIN_WEATHER["function"]["parameters"]
    assert set(arguments) == set(declared["properties"]), arguments
    assert isinstance(arguments["city"], str) and arguments["city"]


def test_streamed_fragments_reassemble_to_the_same_call(sdk, loaded):
    kwargs = dict(model=loaded.name, messages=QUESTION, tools=[WEATHER],
                  tool_choice={"type": "function", "function": {"name": "get_weather"}}, temperature=0)
    whole = sdk.chat.completions.create(**kwargs).choices[0].message.tool_calls[0]
    chunks = list(sdk.chat.completions.create(**kwargs, stream=True))
    calls = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    head, fragments = calls[0], calls[1:]
    assert head.index == 0 and head.id.startswith("call_") and head.type == "function"
    assert head.function.name == "get_weather" and head.function.arguments == ""
    assert len(fragments) > 2 and all(f.id is None and f.function.name is None for f in fragments)
    assert "".join(f.function.arguments for f in fragments) == whole.function.arguments
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]

    with sdk.chat.completions.stream(**kwargs) as stream:  # the SDK's own accumulator agrees
        final = stream.get_final_completion()
    assert final.choices[0].message.tool_calls[0].function.arguments == whole.function.arguments


def test_parse_with_a_pydantic_model(sdk, loaded):
    completion = sdk.chat.completions.parse(model=loaded.name, messages=[{"role": "user", "content": "Tell me about Paris."}],
                                            response_format=City, temperature=0)
    city = completion.choices[0].message.parsed
    assert isinstance(city, City) and city.name and city.country
    assert completion.choices[0].finish_reason == "stop"


def test_json_object_mode_streams_a_json_object(sdk, loaded):
    chunks = list(sdk.chat.completions.create(
        model=loaded.name, messages=[{"role": "user", "content": "Return a JSON object about the weather."}],
        response_format={"type": "json_object"}, temperature=0, max_tokens=120, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert isinstance(json.loads(text), dict)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}]},
         "tools[0].function.parameters"),
        ({"response_format": {"type": "json_schema", "json_schema": {
            "name": "big", "schema": {"enum": [str(i) for i in range(5000)]}}}}, "response_format.json_schema.schema"),
        ({"tools": [{"type": "function", "function": {
            "name": "huge", "description": "word " * 9000}}]}, "tools"),
        ({"parallel_tool_calls": "yes", "tools": [WEATHER]}, "parallel_tool_calls"),
    ],
)
def test_bad_structured_requests_get_400_naming_the_parameter(sdk, loaded, api_server, extra, param):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.with_raw_response.create(model=loaded.name, messages=QUESTION, max_tokens=4, **extra)
    error = caught.value
    assert error.status_code == 400 and error.body["param"] == param
    row = api_server.gateway.log.get(error.response.headers["x-request-id"])
    assert row.completion_tokens in (None, 0)  # refused before any model work


def test_every_choice_follows_the_grammar(sdk, loaded):
    completion = sdk.chat.completions.create(model=loaded.name, messages=QUESTION, tools=[WEATHER, TIME], n=2,
                                             tool_choice="required", temperature=1.0, seed=3)
    assert [c.index for c in completion.choices] == [0, 1]
    for choice in completion.choices:
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        assert isinstance(json.loads(choice.message.tool_calls[0].function.arguments), dict)


# A schema as people write it: JSON Schema admits keys it does not declare unless told otherwise.
OPEN_CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                             "country": {"type": "string", "maxLength": 40}},
             "required": ["city", "country"]}
CLOSED_CITY = {**OPEN_CITY, "additionalProperties": False}
NESTED_OPEN = {"type": "object", "properties": {"place": OPEN_CITY}, "required": ["place"], "additionalProperties": False}
OPTIONAL_KEY = {**CLOSED_CITY, "required": ["city"]}
CAPITAL = "What is the capital of France? Answer in JSON."


def chat_format(schema: dict, strict: bool) -> dict:
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": schema,
                                                                       "strict": strict}}}


def responses_format(schema: dict, strict: bool) -> dict:
    return {"text": {"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": strict}}}


@pytest.mark.parametrize(("schema", "context", "rule"), [
    (OPEN_CITY, "()", "'additionalProperties' is required to be supplied and to be false"),
    (NESTED_OPEN, "('properties', 'place')", "'additionalProperties' is required to be supplied and to be false"),
    (OPTIONAL_KEY, "()", "'required' is required to be supplied and to be an array including every key in "
                         "properties. Missing 'country'"),
])
def test_a_strict_schema_is_refused_unless_closed_and_fully_required_as_at_openai(sdk, loaded, api_server, schema,
                                                                                  context, rule):
    """OpenAI's strict mode takes only schemas whose every object sets additionalProperties: false and
    requires every property; anything else is a 400 before generation, on both endpoints."""
    calls = {
        "response_format.json_schema.schema": lambda: sdk.chat.completions.create(
            model=loaded.name, messages=[{"role": "user", "content": CAPITAL}], max_tokens=30,
            **chat_format(schema, True)),
        "text.format.schema": lambda: sdk.responses.create(model=loaded.name, input=CAPITAL, max_output_tokens=30,
                                                           **responses_format(schema, True)),
    }
    for param, call in calls.items():
        with pytest.raises(openai.BadRequestError) as caught:
            call()
        error = caught.value
        assert error.status_code == 400 and error.body["param"] == param
        assert f"'city': In context={context}, {rule}." in error.body["message"]
        assert api_server.gateway.log.get(error.response.headers["x-request-id"]).completion_tokens in (None, 0)


def test_a_non_strict_open_schema_is_taken_as_sent_and_the_answer_validates(sdk, loaded):
    """strict: false (the default) accepts the same open schema, as OpenAI does; the grammar still
    holds the answer to it (the schema is not closed behind the client's back)."""
    chat = sdk.chat.completions.create(model=loaded.name, messages=[{"role": "user", "content": CAPITAL}],
                                       temperature=0, max_tokens=40, **chat_format(OPEN_CITY, False))
    response = sdk.responses.create(model=loaded.name, input=CAPITAL, temperature=0, max_output_tokens=40,
                                    **responses_format(OPEN_CITY, False))
    assert chat.choices[0].finish_reason == "stop" and response.status == "completed"
    for text in (chat.choices[0].message.content, response.output_text):
        jsonschema.validate(json.loads(text), OPEN_CITY)
    assert response.text.format.strict is False


def test_a_strict_closed_schema_answers_only_its_keys(sdk, loaded):
    response = sdk.responses.create(model=loaded.name, input=CAPITAL, temperature=0, max_output_tokens=40,
                                    **responses_format(CLOSED_CITY, True))
    answer = json.loads(response.output_text)
    jsonschema.validate(answer, CLOSED_CITY)
    assert set(answer) == {"city", "country"}


def test_a_strict_tool_is_refused_unless_its_parameters_are_closed_as_at_openai(sdk, loaded):
    """A function with strict: true follows the same rules (its parameters are a strict schema); without
    strict the grammar still holds the call's arguments to the declared keys."""
    weather = {"name": "get_weather", "strict": True,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    calls = {
        "tools[0].function.parameters": lambda: sdk.chat.completions.create(
            model=loaded.name, messages=QUESTION, max_tokens=30, tools=[{"type": "function", "function": weather}]),
        "tools[0].parameters": lambda: sdk.responses.create(model=loaded.name, input=QUESTION[0]["content"],
                                                            max_output_tokens=30, tools=[{"type": "function", **weather}]),
    }
    for param, call in calls.items():
        with pytest.raises(openai.BadRequestError) as caught:
            call()
        assert caught.value.body["param"] == param
        assert ("Invalid schema for function 'get_weather': In context=(), 'additionalProperties' is required to be "
                "supplied and to be false.") in caught.value.body["message"]
