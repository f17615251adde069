"""The API through langchain-openai's ChatOpenAI: invoke, stream, a forced tool call and its result, errors."""

from __future__ import annotations

import json

import openai
import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.sdk_server import api_server, base_url  # noqa: F401  (fixtures: this module's own server)
from tests.test_api import KEY

QUESTION = "Name a colour."


@tool
def get_weather(city: str, unit: str) -> str:
    """Current weather for a city, in celsius or fahrenheit."""
    return json.dumps({"city": city, "temp": 18, "unit": unit})


def chat_model(base_url: str, loaded, key: str = KEY, **kwargs) -> ChatOpenAI:
    settings = {"temperature": 0, "max_tokens": 8, "seed": 1, "max_retries": 0, "timeout": 120} | kwargs
    return ChatOpenAI(base_url=base_url, api_key=key, model=loaded.name, **settings)


def row_for(api_server, request_id):
    row = api_server.gateway.log.get(request_id)
    assert row is not None, request_id
    return row


def test_invoke_and_stream_agree_at_temperature_0(base_url, api_server, loaded):
    llm = chat_model(base_url, loaded)
    answer = llm.invoke([HumanMessage(QUESTION)])
    assert isinstance(answer, AIMessage) and answer.content and isinstance(answer.content, str)
    meta = answer.response_metadata
    assert meta["finish_reason"] in ("stop", "length") and meta["model_name"] == loaded.name
    assert meta["id"].startswith("chatcmpl-")
    usage = answer.usage_metadata
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert 0 < usage["output_tokens"] <= 8 and usage["input_tokens"] > 0
    assert meta["token_usage"]["prompt_tokens"] == usage["input_tokens"]

    chunks = list(chat_model(base_url, loaded, stream_usage=True).stream([HumanMessage(QUESTION)]))
    assert all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    assert sum(1 for chunk in chunks if chunk.content) > 1, "the answer arrived in pieces"
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert whole.content == answer.content
    assert whole.response_metadata["finish_reason"] == meta["finish_reason"]
    streamed = whole.usage_metadata
    assert (streamed["input_tokens"], streamed["output_tokens"], streamed["total_tokens"]) == \
        (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"])


def test_the_responses_api_invoke_and_stream_agree(base_url, api_server, loaded):
    """use_responses_api=True: the same ChatOpenAI on /v1/responses (no seed there: the field does not exist)."""
    llm = ChatOpenAI(base_url=base_url, api_key=KEY, model=loaded.name, temperature=0, max_tokens=8, max_retries=0,
                     timeout=120, use_responses_api=True, include_response_headers=True)
    question = [HumanMessage("Name a fruit.")]
    answer = llm.invoke(question)
    assert answer.text and answer.response_metadata["id"].startswith("resp_")
    row = row_for(api_server, answer.response_metadata["headers"]["x-request-id"])
    assert row.journey["request"]["path"] == "/v1/responses"
    usage = answer.usage_metadata
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] and 0 < usage["output_tokens"] <= 8
    chunks = list(llm.stream(question))
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert whole.text == answer.text
    streamed = whole.usage_metadata
    assert (streamed["input_tokens"], streamed["output_tokens"]) == (usage["input_tokens"], usage["output_tokens"])
    # The same prompt again: the prefix cache served part of it, and langchain reads that from usage.
    assert 0 < streamed["input_token_details"]["cache_read"] < streamed["input_tokens"]


def test_batch_answers_each_prompt(base_url, loaded):
    llm = chat_model(base_url, loaded)
    first, second = llm.batch([[HumanMessage(QUESTION)], [HumanMessage("Name an animal.")]])
    assert first.content and second.content
    assert first.content == llm.invoke([HumanMessage(QUESTION)]).content  # greedy: the same answer alone


def test_forced_tool_call_and_its_result_sent_back(base_url, api_server, loaded):
    llm = chat_model(base_url, loaded, max_tokens=60, include_response_headers=True)
    with_tool = llm.bind_tools([get_weather], tool_choice="get_weather")
    question = [HumanMessage("What's the weather in Paris?")]
    called = with_tool.invoke(question)
    assert called.response_metadata["finish_reason"] == "tool_calls"
    assert called.invalid_tool_calls == []
    (call,) = called.tool_calls
    assert call["name"] == "get_weather" and call["id"]
    # The arguments as they crossed the wire (the call log keeps the body sent) are valid JSON.
    sent = row_for(api_server, called.response_metadata["headers"]["x-request-id"]).journey["response"]["body"]
    (wire_call,) = sent["choices"][0]["message"]["tool_calls"]
    assert wire_call["id"] == call["id"]
    arguments = json.loads(wire_call["function"]["arguments"])
    assert arguments == call["args"]
    assert set(arguments) <= {"city", "unit"} and isinstance(arguments.get("city"), str)

    result = get_weather.invoke(call)  # a ToolMessage answering this call id
    assert isinstance(result, ToolMessage) and result.tool_call_id == call["id"]
    final = llm.bind_tools([get_weather], tool_choice="none").invoke(question + [called, result])
    assert final.content and not final.tool_calls
    assert final.response_metadata["finish_reason"] in ("stop", "length")
    # The call and its result reached the prompt the model read, in ChatML.
    prompt_messages = row_for(api_server, final.response_metadata["headers"]["x-request-id"]).journey["request"]["validated"]["messages"]
    assert [m["role"] for m in prompt_messages] == ["user", "assistant", "tool"]
    assert prompt_messages[1]["tool_calls"][0]["id"] == call["id"]
    assert prompt_messages[2]["tool_call_id"] == call["id"]


def test_streamed_tool_call_has_the_same_arguments(base_url, loaded):
    llm = chat_model(base_url, loaded, max_tokens=60).bind_tools([get_weather], tool_choice="get_weather")
    question = [HumanMessage("What's the weather in Paris?")]
    whole = llm.invoke(question)
    chunks = list(llm.stream(question))
    streamed = chunks[0]
    for chunk in chunks[1:]:
        streamed += chunk
    assert [c["args"] for c in streamed.tool_calls] == [c["args"] for c in whole.tool_calls]
    assert streamed.tool_calls[0]["name"] == "get_weather"
    assert streamed.response_metadata["finish_reason"] == "tool_calls"


def test_wrong_key_is_the_openai_authentication_error(base_url, api_server, loaded):
    before = api_server.gateway.refused["unauthorized"]
    with pytest.raises(openai.AuthenticationError) as caught:
        chat_model(base_url, loaded, key="sk-not-a-key", max_retries=2).invoke(QUESTION)
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    assert api_server.gateway.refused["unauthorized"] == before + 1, "a 401 is not retried"


@pytest.mark.parametrize("streaming", [False, True])
def test_too_long_prompt_is_a_400_not_a_retried_429(base_url, api_server, loaded, streaming):
    llm = chat_model(base_url, loaded, max_retries=2, max_tokens=4)
    text = "hello" + " hello" * (loaded.context_window + 50)
    before = _statuses(api_server)
    with pytest.raises(openai.BadRequestError) as caught:
        if streaming:
            list(llm.stream([HumanMessage(text)]))
        else:
            llm.invoke([HumanMessage(text)])
    assert caught.value.status_code == 400
    assert isinstance(caught.value, ContextOverflowError)  # langchain's own class for it, too
    assert caught.value.code == "context_length_exceeded" and caught.value.param == "messages"
    assert _statuses(api_server)[len(before):] == [400], "one call, not retried"


def _statuses(api_server) -> list[int]:
    return [row.status for row in sorted(api_server.gateway.log.recent(200), key=lambda r: r.created)]
