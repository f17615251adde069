"""The Responses stream events for a request with tools: which item opens, and when, is decided by
what the model writes (the steps here are the engine's step records reduced to what the events read)."""

import json
import time
from types import SimpleNamespace

from lifecycle.model import model_name
from lifecycle.api.response_object import response_events
from lifecycle.api.responses_request import validate_responses_request
from tests.openai_schemas import violations

TOOL = {"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}


def run(pieces: list[str], finished: str = "stop") -> tuple[list[dict], dict]:
    request = validate_responses_request({"model": model_name(), "input": "Weather?", "tools": [TOOL]})
    steps = [SimpleNamespace(delta=piece, finished=finished if index == len(pieces) - 1 else None)
             for index, piece in enumerate(pieces)]
    final: list[dict] = []
    events = [event.data for event in response_events(steps, request, "resp_1", 10, time.perf_counter(), final)]
    assert all(violations("ResponseStreamEvent", data) == [] for data in events)
    return events, final[0]


def test_text_with_tools_opens_the_message_at_its_first_characters():
    events, response = run(["Hello", " there."])
    kinds = [data["type"] for data in events]
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                     "response.output_text.done", "response.content_part.done", "response.output_item.done",
                     "response.completed"]
    assert response["output"][0]["content"][0]["text"] == "Hello there."
    assert events[2]["item"]["id"] == response["output"][0]["id"]


def test_a_call_streams_its_arguments_under_one_item():
    pieces = ["<tool_call>\n", '{"name": "get_weather", ', '"arguments": {"ci', 'ty": "Paris"}}', "\n</tool_call>"]
    events, response = run(pieces)
    kinds = [data["type"] for data in events]
    assert kinds[2] == "response.output_item.added" and events[2]["item"]["type"] == "function_call"
    assert kinds[-3:] == ["response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    deltas = "".join(data["delta"] for data in events if data["type"] == "response.function_call_arguments.delta")
    item = response["output"][0]
    assert json.loads(deltas) == {"city": "Paris"} and item["arguments"] == deltas
    assert (item["id"], item["call_id"]) == (events[2]["item"]["id"], events[2]["item"]["call_id"])
    assert violations("Response", response) == []


def test_a_call_cut_before_its_name_ends_as_incomplete_text():
    events, response = run(["<tool_call>\n", '{"na'], finished="length")
    kinds = [data["type"] for data in events]
    assert kinds[2:5] == ["response.output_item.added", "response.content_part.added", "response.output_text.delta"]
    assert kinds[-1] == "response.incomplete"
    assert response["output"][0]["type"] == "message" and response["output"][0]["status"] == "incomplete"
    assert response["output"][0]["content"][0]["text"] == '<tool_call>\n{"na'
