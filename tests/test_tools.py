"""Tools: definitions checked and costed in the prompt, tool_choice rules, calls read back whole and
as OpenAI-shaped streamed fragments, and tool_choice variants on the real model."""

from __future__ import annotations

import json

import pytest

from lifecycle.stages.context_window import TOOLS, render_messages
from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import generate
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.stages.tokenization import encode_plain
from lifecycle.features.grammar import GrammarConstraint
from lifecycle.features.tools import (
    CALL_CLOSE,
    CALL_OPEN,
    ToolCallStream,
    call_text,
    output_rules,
    parse_tool_choice,
    parse_tools,
    read_output,
    tools_prompt,
)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time in a timezone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"],
                   "additionalProperties": False}}}
GREEDY = SamplingSettings(temperature=0)
QUESTION = [{"role": "user", "content": "What's the weather in Paris?"}]


@pytest.mark.parametrize(
    ("tools", "choice", "param"),
    [
        ("get_weather", None, "tools"),
        ([{"type": "function"}], None, "tools[0]"),
        ([{"type": "function", "function": {"name": "no spaces allowed"}}], None, "tools[0].function.name"),
        ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}], None,
         "tools[0].function.parameters"),
        ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "if": {}}}}], None,
         "tools[0].function.parameters"),
        ([WEATHER, WEATHER], None, "tools"),
        (None, "required", "tool_choice"),
        (None, {"type": "function", "function": {"name": "get_weather"}}, "tool_choice"),
        ([WEATHER], {"type": "function", "function": {"name": "get_time"}}, "tool_choice"),
        ([WEATHER], "sometimes", "tool_choice"),
        ([WEATHER], {"type": "function"}, "tool_choice"),
    ],
)
def test_bad_tools_and_contradictory_tool_choice_are_refused(tools, choice, param):
    with pytest.raises(LifecycleError) as caught:
        output_rules(None, tools, choice)
    assert caught.value.param == param


def test_tool_choice_defaults_like_openai():
    assert parse_tool_choice(None, parse_tools([WEATHER])).mode == "auto"
    assert parse_tool_choice(None, []).mode == "none"
    assert parse_tool_choice("none", []).mode == "none"
    assert output_rules(None, [WEATHER], "none").grammar is None
    assert output_rules(None, [WEATHER], "none").may_call is False


def test_tool_definitions_are_a_segment_of_the_prompt_and_cost_their_tokens(loaded):
    tools = [WEATHER["function"], TIME["function"]]
    plain, with_tools = render_messages(QUESTION), render_messages(QUESTION, tools)
    segment = next(s for s in with_tools.segments if s.name == TOOLS)
    assert segment.text == tools_prompt(tools) and "get_time" in segment.text and CALL_OPEN.strip() in segment.text
    assert sum(s.tokens for s in with_tools.segments) == len(with_tools.ids)
    assert len(with_tools.ids) - len(plain.ids) == segment.tokens
    assert abs(segment.tokens - len(encode_plain(segment.text))) <= 1  # one token may merge across the boundary


def test_a_call_and_its_result_travel_back_in_history(loaded):
    arguments = '{"city": "Paris", "unit": "celsius"}'
    history = QUESTION + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18}'},
    ]
    prompt = render_messages(history, [WEATHER["function"]])
    assert call_text("get_weather", arguments) in prompt.text
    assert "<|im_start|>tool\n{\"temp_c\": 18}<|im_end|>" in prompt.text


def fragments(text: str, pieces: list[str]) -> tuple[list[dict], ToolCallStream]:
    reader = ToolCallStream("call_test")
    return [delta for piece in pieces for delta in reader.feed(piece)], reader


def test_a_streamed_call_starts_with_id_and_name_then_argument_fragments():
    arguments = '{"city": "Pa\\"ris}", "unit": "celsius"}'
    text = call_text("get_weather", arguments)
    deltas, reader = fragments(text, [text[i:i + 3] for i in range(0, len(text), 3)])
    first = deltas[0]["tool_calls"][0]
    assert first == {"index": 0, "id": "call_test", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    rest = [d["tool_calls"][0] for d in deltas[1:]]
    assert all(set(call) == {"index", "function"} and set(call["function"]) == {"arguments"} for call in rest)
    assert "".join(call["function"]["arguments"] for call in rest) == arguments == reader.call.arguments
    assert json.loads(arguments)["city"] == 'Pa"ris}'


def test_plain_text_streams_as_content_and_reads_back_as_content():
    deltas, reader = fragments("Sunny.", ["Sun", "ny."])
    assert deltas == [{"content": "Sun"}, {"content": "ny."}] and reader.call is None
    assert read_output("Sunny.") == ("Sunny.", [])
    content, calls = read_output(call_text("get_time", '{"timezone": "UTC"}'))
    assert content is None and [(c.name, c.arguments) for c in calls] == [("get_time", '{"timezone": "UTC"}')]
    cut = CALL_OPEN + '{"name": "get_ti'
    assert read_output(cut) == (cut, [])  # cut before the arguments: no call to return


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("required", {"get_weather", "get_time"}), ({"type": "function", "function": {"name": "get_time"}}, {"get_time"})],
)
def test_required_and_named_choices_always_produce_a_valid_call(loaded, choice, expected):
    rules = output_rules(None, [WEATHER, TIME], choice)
    prompt_ids = render_messages(QUESTION, rules.definitions()).ids
    result = generate(loaded, prompt_ids, GREEDY, 80, constraint=rules.constraint(loaded))
    assert result.finish_reason == "stop" and result.text.endswith(CALL_CLOSE)
    content, calls = read_output(result.text)
    assert content is None and len(calls) == 1 and calls[0].name in expected
    tool = {"get_weather": WEATHER, "get_time": TIME}[calls[0].name]
    import jsonschema

    jsonschema.validate(json.loads(calls[0].arguments), tool["function"]["parameters"])


def test_auto_lets_the_model_answer_in_text_and_none_never_calls(loaded):
    for choice in ("auto", "none"):
        rules = output_rules(None, [WEATHER], choice)
        prompt_ids = render_messages([{"role": "user", "content": "Say hello."}], rules.definitions()).ids
        result = generate(loaded, prompt_ids, GREEDY, 30, constraint=rules.constraint(loaded))
        content, calls = read_output(result.text)
        assert calls == [] and content and not content.startswith("<")


def _grammar_takes(loaded, grammar: str, text: str) -> bool:
    """Whether ``text``, as the model's tokens, is a whole answer the grammar accepts."""
    constraint = GrammarConstraint(loaded, grammar)
    with loaded.tokenizer_lock:
        ids = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
    try:
        for token_id in ids:
            constraint.accept(token_id)
    except LifecycleError:
        return False
    return constraint.complete


def test_call_arguments_hold_only_the_declared_properties_at_every_depth(loaded):
    nested = {"type": "function", "function": {"name": "book", "parameters": {
        "type": "object", "required": ["trip"],
        "properties": {"trip": {"type": "object", "properties": {"properties": {"type": "string"}}},
                       "extra": {"type": "object", "additionalProperties": {"type": "integer"}}}}}}
    grammar = output_rules(None, [nested], "required").grammar

    def takes(arguments: str) -> bool:
        return _grammar_takes(loaded, grammar, call_text("book", arguments))

    assert takes('{"trip": {"properties": "a property named properties is declared"}}')
    assert takes('{"trip": {}, "extra": {"n": 1}}')  # an explicit additionalProperties is kept
    assert not takes('{"trip": {}, "type": "object"}')  # an undeclared key at the top
    assert not takes('{"trip": {"city": "Paris"}}')  # an undeclared key one level down
    assert not takes('{"extra": {"n": 1}}')  # "trip" is required
    assert not takes('{"trip": {}, "extra": {"n": "one"}}')
