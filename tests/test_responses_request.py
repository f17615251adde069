"""The Responses request: OpenAI's rules on arbitrary JSON, its translation to the chat form, and
what differs on the wire between the two forms of one call."""

import json

import pytest

from lifecycle.errors import LifecycleError
from lifecycle.model import model_name
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.stages.request import chat_request
from lifecycle.api.response_store import ResponseStore
from lifecycle.api.responses_request import (
    as_responses_request,
    response_format,
    validate_responses_request,
    wire_differences,
)

MODEL = model_name()


def rejected(**fields) -> LifecycleError:
    with pytest.raises(LifecycleError) as caught:
        validate_responses_request({"model": MODEL, **fields})
    return caught.value


def test_string_input_and_instructions_become_chat_messages():
    request = validate_responses_request({"model": MODEL, "input": "Hi", "instructions": "Be brief.",
                                          "max_output_tokens": 7, "temperature": 0.5})
    chat = request.to_chat()
    assert chat.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert (chat.max_tokens, chat.sampling.temperature, chat.logprobs) == (7, 0.5, False)


def test_items_and_history_keep_their_order_and_instructions_are_not_carried_over():
    request = validate_responses_request({"model": MODEL, "instructions": "New rules.", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
        {"role": "user", "content": "now"},
    ]})
    history = [{"role": "user", "content": "before"}, {"role": "assistant", "content": "answer"}]
    assert [m["content"] for m in request.to_chat(history).messages] == ["New rules.", "before", "answer", "dev", "now"]
    assert request.to_chat(history).messages[3]["role"] == "system"


def test_replayed_output_items_are_accepted():
    item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "Paris.", "annotations": [], "logprobs": []}]}
    request = validate_responses_request({"model": MODEL, "input": [item, {"role": "user", "content": "More"}]})
    assert request.input_messages[0] == {"role": "assistant", "content": "Paris."}


@pytest.mark.parametrize("fields,param,code", [
    ({}, "input", "missing_required_parameter"),
    ({"input": ""}, "input", "empty_content"),
    ({"input": 5}, "input", "invalid_type"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type", "unsupported_value"),
    ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id", "missing_required_parameter"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{"}]}, "input[0].arguments",
     "invalid_value"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens", "integer_below_min_value"),
    ({"input": "x", "text": {"format": {"type": "bogus"}}}, "text.format", None),
    ({"input": "x", "text": {"format": "json"}}, "text.format", "invalid_type"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "a b", "schema": {"type": "object"}}}},
     "text.format.name", "invalid_value"),  # no json_schema level in text.format, unlike chat's response_format
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "a", "strict": True, "schema": {
        "type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}}}}, "text.format.schema",
     "invalid_schema"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools", "unsupported_value"),
    ({"input": "x", "tools": [{"type": "function", "name": "a b"}]}, "tools[0].name", "invalid_value"),
    ({"input": "x", "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools[0].function",
     "unknown_parameter"),
    ({"input": "x", "tool_choice": "required"}, "tool_choice", "invalid_value"),
    ({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}},
     "tool_choice", "invalid_value"),
    ({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "f",
                                                                                  "function": {"name": "f"}}},
     "tool_choice.function", "unknown_parameter"),
    ({"input": "x", "background": True}, "background", "unsupported_parameter"),
    ({"input": "x", "top_logprobs": 3}, "top_logprobs", "invalid_value"),
    ({"input": "x", "include": ["file_search_call.results"]}, "include", "unsupported_value"),
    ({"input": "x", "stream_options": {"include_obfuscation": False}}, "stream_options", "invalid_value"),
    ({"input": "x", "top_k": -1}, "top_k", "integer_below_min_value"),
    ({"input": "x", "max_tokens": 5}, "max_tokens", "unknown_parameter"),
])
def test_bad_fields_are_named(fields, param, code):
    error = rejected(**fields)
    assert error.param.startswith(param)
    assert code is None or error.code == code


def test_text_format_becomes_chats_response_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False}
    text_format = {"type": "json_schema", "name": "thing", "schema": schema, "strict": True}
    assert response_format(text_format) == {"type": "json_schema",
                                            "json_schema": {"name": "thing", "schema": schema, "strict": True}}
    assert response_format({"type": "json_object"}) == {"type": "json_object"}
    assert response_format(None) is None


def test_logprobs_need_include_and_default_to_no_alternatives():
    request = validate_responses_request({"model": MODEL, "input": "x", "include": ["message.output_text.logprobs"]})
    assert request.top_logprobs == 0 and request.to_chat().logprobs_count == 0


def test_as_responses_request_asks_the_same_thing():
    chat = chat_request("What is 2+2?", system="Be brief.", sampling=SamplingSettings(seed=4, top_k=40), stop=["\n"],
                        max_tokens=9)
    responses = as_responses_request(chat)
    assert responses.to_payload() == {"model": chat.model, "instructions": "Be brief.", "input": "What is 2+2?",
                                      "temperature": 1.0, "top_p": 1.0, "max_output_tokens": 9, "stream": False,
                                      "top_k": 40}
    back = responses.to_chat()
    assert (back.messages, back.max_tokens, back.sampling.top_k) == (chat.messages, chat.max_tokens, chat.sampling.top_k)
    rows = {row.aspect: row for row in wire_differences(chat, responses)}
    assert rows["body size"].chat_completions == f"{len(chat.wire_body()):,} bytes"
    assert rows["body size"].responses == f"{len(json.dumps(responses.to_payload(), separators=(',', ':')))} bytes"
    assert rows["no equivalent"].chat_completions == "stop, seed"


def test_the_store_is_bounded_and_per_key():
    store = ResponseStore(capacity=2)
    for index in range(3):
        store.put(f"resp_{index}", "alice", [{"role": "user", "content": str(index)}], {})
    assert len(store) == 2 and store.get("resp_0", "alice") is None
    assert store.get("resp_2", "alice").messages == ({"role": "user", "content": "2"},)
    assert store.get("resp_2", "bob") is None


WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}}


def test_flat_function_tools_become_chats_nested_tools():
    request = validate_responses_request({"model": MODEL, "input": "Weather in Paris?", "tools": [WEATHER],
                                          "tool_choice": {"type": "function", "name": "get_weather"}})
    chat = request.to_chat()
    assert chat.output.tool_choice.mode == "function" and chat.output.tool_choice.name == "get_weather"
    assert chat.output.definitions() == [{"name": "get_weather", "description": "The weather in a city.",
                                          "parameters": WEATHER["parameters"]}]
    assert chat.output.grammar is not None
    assert request.to_payload()["tools"] == [WEATHER]


def test_tool_choice_errors_show_the_responses_form():
    error = rejected(input="x", tools=[WEATHER], tool_choice="any")
    assert error.param == "tool_choice" and '{"type": "function", "name": ...}' in error.message


def test_function_call_items_become_an_assistant_call_and_a_tool_message():
    arguments = json.dumps({"city": "Paris"})
    request = validate_responses_request({"model": MODEL, "tools": [WEATHER], "input": [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": arguments,
         "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 C"},
    ]})
    assert request.to_chat().messages[1:] == [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "content": "Sunny, 21 C", "tool_call_id": "call_1"},
    ]
