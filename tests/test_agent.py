"""The agent loop: the local tools on their own, the loop on the real model through the engine,
and the same loop end to end over the API with the official openai SDK."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from lifecycle.features.agent import (
    LOCAL_TOOLS,
    MAX_ROUNDS,
    Reply,
    ToolRejected,
    calculate,
    convert_units,
    engine_send,
    run_agent,
    run_tool,
)
from lifecycle.errors import LifecycleError
from tests.sdk_server import api_server, base_url, sdk  # noqa: F401  (fixtures: this module's own server)

QUESTION = [{"role": "user", "content": "What is 17 times 23?"}]


@pytest.mark.parametrize(("expression", "python"),
                         [("17 * 23", 17 * 23), ("(2 + 3) ** 2 - 7 / 2", (2 + 3) ** 2 - 7 / 2),
                          ("-4 % 3 + 10 // 4", -4 % 3 + 10 // 4), ("1.5 * -2", 1.5 * -2)])
def test_the_calculator_agrees_with_python_arithmetic(expression, python):
    assert calculate(expression) == {"expression": expression, "result": python}


@pytest.mark.parametrize("expression", ["__import__('os').system('true')", "abs(-1)", "x + 1", "2 ** 1000", "1 / 0",
                                        "17 *", "(-8) ** 0.5", "(9 ** 99) ** 99", "10 ** 18 * 10"])
def test_the_calculator_rejects_anything_but_arithmetic(expression):
    with pytest.raises(ToolRejected):
        calculate(expression)


def test_the_unit_converter_and_the_clock():
    assert convert_units(5, "foot", "cm")["result"] == pytest.approx(152.4)
    assert convert_units(100, "celsius", "fahrenheit")["result"] == pytest.approx(212)
    assert convert_units(1, "pound", "g")["result"] == pytest.approx(453.59237)
    with pytest.raises(ToolRejected):
        convert_units(1, "kg", "km")
    before = datetime.now(timezone.utc).replace(microsecond=0)
    told = datetime.fromisoformat(run_tool(LOCAL_TOOLS, "current_time", "{}")["utc"])
    assert before <= told <= datetime.now(timezone.utc)


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [("get_weather", "{}", "unknown tool 'get_weather'"),
     ("calculate", '{"expression": "17 *', "JSONDecodeError"),
     ("calculate", '{"expression": "2 + 2", "verbose": true}', "invalid arguments"),
     ("convert_units", '{"value": 1, "from_unit": "kg", "to_unit": "km"}', "not the same kind of quantity"),
     ("calculate", '{"expression": "(9 ** 99) ** 99"}', "a result beyond"),
     ("calculate", '{"expression": "(10.0 ** 18) ** 99"}', "the tool failed: OverflowError")],
)
def test_what_goes_wrong_goes_back_as_the_tools_result(name, arguments, error):
    result = run_tool(LOCAL_TOOLS, name, arguments)
    assert set(result) == {"error"} and error in result["error"]


def test_a_bad_question_or_round_limit_is_refused_before_any_model_work():
    def never(*_):
        raise AssertionError("the model was called")

    for question, rounds in (([], 2), ([{"role": "user", "content": "  "}], 2), ([{"role": "system", "content": "Hi"}], 2),
                             (QUESTION, 0), (QUESTION, MAX_ROUNDS + 1), (QUESTION, True)):
        with pytest.raises(LifecycleError):
            run_agent(question, never, max_rounds=rounds)


def _check_loop(run, answer_must_hold: int) -> None:
    """A call, its result appended, a second call that answers with the tool's result."""
    assert run.outcome == "answered" and len(run.rounds) == 2
    first, second = run.rounds
    assert first.reply.finish_reason == "tool_calls"
    (call,) = first.reply.tool_calls
    assert call["function"]["name"] == "calculate"
    assert set(json.loads(call["function"]["arguments"])) == {"expression"}
    assert first.tool_results == [run_tool(LOCAL_TOOLS, "calculate", call["function"]["arguments"])]
    assert first.tool_results[0]["result"] == answer_must_hold
    # the second request re-sends the first one's messages, the call and the tool's result
    assert second.messages[: len(first.messages)] == first.messages
    assistant, tool = second.messages[len(first.messages):]
    assert assistant["role"] == "assistant" and assistant["tool_calls"] == [call]
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(first.tool_results[0])}
    assert second.prompt_tokens > first.prompt_tokens
    assert 0 < second.cached_tokens <= second.prompt_tokens  # the first round's prompt came from the cache
    assert str(answer_must_hold) in run.answer
    assert run.messages[-1] == {"role": "assistant", "content": run.answer}


def test_the_loop_on_the_engine_calls_runs_the_tool_and_answers_with_its_result(loaded):
    _check_loop(run_agent(QUESTION, engine_send(loaded, max_tokens=48)), 17 * 23)


def test_the_round_limit_ends_a_loop_that_keeps_calling(loaded):
    run = run_agent(QUESTION, engine_send(loaded, max_tokens=48), max_rounds=2, then_choice="required")
    assert run.outcome == "round_limit" and run.answer is None and len(run.rounds) == 2
    assert all(r.reply.finish_reason == "tool_calls" and r.tool_results for r in run.rounds)
    assert [m["role"] for m in run.messages] == ["user", "assistant", "tool", "assistant", "tool"]


def test_the_same_loop_over_the_api_with_the_official_sdk(sdk, loaded):  # noqa: F811
    def send(messages, definitions, tool_choice) -> Reply:
        completion = sdk.chat.completions.create(model=loaded.name, messages=messages, tools=definitions,
                                                 tool_choice=tool_choice, temperature=0, max_tokens=48)
        choice, usage = completion.choices[0], completion.usage
        calls = [call.model_dump() for call in choice.message.tool_calls or []]
        return Reply(choice.message.content, calls, choice.finish_reason, usage.prompt_tokens,
                     usage.prompt_tokens_details.cached_tokens, usage.completion_tokens)

    over_api = run_agent(QUESTION, send)
    _check_loop(over_api, 17 * 23)
    on_engine = run_agent(QUESTION, engine_send(loaded, max_tokens=48))
    assert [r.prompt_tokens for r in over_api.rounds] == [r.prompt_tokens for r in on_engine.rounds]
    assert over_api.answer == on_engine.answer


def test_a_malformed_tool_list_is_refused_naming_the_tool_before_any_model_work(loaded):
    from lifecycle.features.agent import LocalTool

    broken = LocalTool({"type": "function", "function": {"name": "no spaces allowed"}}, lambda: {})
    with pytest.raises(LifecycleError) as caught:
        run_agent(QUESTION, engine_send(loaded), tools=[*LOCAL_TOOLS, broken])
    assert caught.value.param == "tools[3].function.name"
