"""SSE streaming of a real generation: chunk shapes, round trip to the non-streamed text, metrics, failures."""

import json

import pytest

from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import generate
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.stages.streaming import (
    StreamEvent, assemble, error_events, parse_sse, stream_completion, stream_metrics, stream_problems,
)
from tests.reference import reference_tokenizer

GREEDY = SamplingSettings(temperature=0, seed=1)
PARIS = "What is the capital of France? Answer with one word."


def chat_ids(loaded, question):
    with loaded.tokenizer_lock:
        return reference_tokenizer(loaded).apply_chat_template(
            [{"role": "user", "content": question}], add_generation_prompt=True
        )["input_ids"]


def stream(loaded, ids, max_tokens, include_usage=True, **kwargs):
    return list(stream_completion(loaded, ids, GREEDY, max_tokens, "smollm2", "chatcmpl-test", include_usage, **kwargs))


@pytest.fixture(scope="module")
def paris(loaded):
    ids = chat_ids(loaded, PARIS)
    return ids, stream(loaded, ids, 16), generate(loaded, ids, GREEDY, 16)


def test_stream_parses_back_to_the_non_streamed_text(paris):
    ids, events, full = paris
    text, finish_reason, usage = assemble(parse_sse("".join(e.sse for e in events)))
    assert text == full.text and "Paris" in text
    assert finish_reason == full.finish_reason == "stop"
    assert usage == {"prompt_tokens": len(ids), "completion_tokens": full.completion_tokens,
                     "total_tokens": len(ids) + full.completion_tokens}


def test_chunk_shapes_follow_the_openai_stream(paris):
    _, events, _ = paris
    assert events[-1].data is None and events[-1].sse == "data: [DONE]\n\n"
    for event in events:
        assert event.sse.startswith("data: ") and event.sse.endswith("\n\n") and event.sse.count("\n") == 2
    chunks = [e.data for e in events[:-1]]
    assert all(json.loads(e.sse[6:]) == e.data for e in events[:-1])
    assert {(c["id"], c["created"], c["model"], c["object"]) for c in chunks} == {
        ("chatcmpl-test", chunks[0]["created"], "smollm2", "chat.completion.chunk")}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    choice_chunks = [c for c in chunks if c["choices"]]
    finishing = [c for c in choice_chunks if c["choices"][0]["finish_reason"] is not None]
    assert finishing == [choice_chunks[-1]] and choice_chunks[-1]["choices"][0]["delta"] == {}
    assert all(c["choices"][0]["delta"].get("content") for c in choice_chunks[1:-1])  # no empty deltas
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert all(c["usage"] is None for c in chunks[:-1])
    assert stream_problems(chunks) == []


def test_without_usage_there_is_no_usage_field(loaded):
    events = stream(loaded, chat_ids(loaded, "Say hi"), 3, include_usage=False)
    chunks = parse_sse("".join(e.sse for e in events))
    assert all("usage" not in c for c in chunks) and chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert assemble(chunks)[2] is None and stream_problems(chunks) == []


def test_timestamps_and_metrics_come_from_the_events(paris):
    _, events, _ = paris
    times = [e.at for e in events]
    assert times == sorted(times) and times[0] >= 0
    content = [e.at for e in events if e.data and e.data["choices"] and e.data["choices"][0]["delta"].get("content")]
    metrics = stream_metrics(events)
    assert metrics.ttft == content[0] > times[0]  # the role chunk goes out before the prefill
    assert metrics.inter_token == pytest.approx([b - a for a, b in zip(content, content[1:])])
    assert metrics.tokens_per_second == pytest.approx(len(content[1:]) / (content[-1] - content[0]))
    assert metrics.total_seconds == times[-1]


def test_metrics_on_known_timestamps():
    def event(at, content):
        data = {"choices": [{"index": 0, "delta": {"content": content} if content else {}, "finish_reason": None}]}
        return StreamEvent(data, "", at)

    metrics = stream_metrics([event(0.1, ""), event(0.5, "a"), event(0.75, "b"), event(1.25, "c"), event(1.3, "")])
    assert metrics.ttft == 0.5 and metrics.inter_token == pytest.approx([0.25, 0.5])
    assert metrics.tokens_per_second == pytest.approx(2 / 0.75) and metrics.total_seconds == 1.3


def test_emoji_answer_arrives_whole_without_replacement_characters(loaded):
    ids = chat_ids(loaded, "Write three emoji that show happiness.")  # greedy: 🌟, three tokens each
    events = stream(loaded, ids, 7)
    deltas = [e.data["choices"][0]["delta"].get("content", "") for e in events[1:-3]]
    assert deltas and not any("\ufffd" in d for d in deltas)
    full = generate(loaded, ids, GREEDY, 7)
    with loaded.tokenizer_lock:
        decoded = reference_tokenizer(loaded).decode(full.token_ids, skip_special_tokens=True)
    assert "".join(deltas) == full.text == decoded.rstrip("\ufffd")
    assert full.finish_reason == "length" and full.steps[-1].held  # cut mid-character: dropped, not U+FFFD
    assert len(deltas) < full.completion_tokens  # split characters were held, not sent as pieces


def test_stop_sequence_never_reaches_the_wire(loaded, paris):
    ids, _, full = paris
    events = stream(loaded, ids, 16, stop=[" Paris"])
    text, finish_reason, _ = assemble(parse_sse("".join(e.sse for e in events)))
    assert finish_reason == "stop" and text == full.text[: full.text.index(" Paris")]


def test_failure_mid_stream_ends_with_an_error_event_then_done(loaded):
    calls = []

    def explode():
        calls.append(1)
        if len(calls) > 3:
            raise RuntimeError("injected failure")
        return False

    events = stream(loaded, chat_ids(loaded, "Say hi"), 10, cancelled=explode)
    assert events[-1].data is None and "error" in events[-2].data
    assert isinstance(events[-2].error, RuntimeError)
    assert events[-2].data["error"]["type"] == "server_error" and "injected failure" in events[-2].data["error"]["message"]
    chunks = parse_sse("".join(e.sse for e in events))
    assert any(c["choices"] and c["choices"][0]["delta"].get("content") for c in chunks[:-1])
    with pytest.raises(LifecycleError):
        assemble(chunks)


def test_error_events_shape():
    error, done = error_events("boom", started=0.0, code="internal")
    assert error.sse.startswith("data: {") and done.sse == "data: [DONE]\n\n"
    assert error.data == {"error": {"message": "boom", "type": "server_error", "param": None, "code": "internal"}}


def test_cancelled_stream_still_closes_properly(loaded):
    events = stream(loaded, chat_ids(loaded, "Say hi"), 10, cancelled=lambda: True)
    chunks = parse_sse("".join(e.sse for e in events))
    assert assemble(chunks) == ("", "cancelled", {"prompt_tokens": len(chat_ids(loaded, "Say hi")),
                                                   "completion_tokens": 0, "total_tokens": len(chat_ids(loaded, "Say hi"))})


def test_bad_request_raises_before_any_event(loaded):
    with pytest.raises(LifecycleError) as error:
        stream_completion(loaded, [1, 2], GREEDY, 0, "m", "id", True)
    assert error.value.param == "max_tokens"


def test_parse_sse_tolerates_crlf_comments_and_other_fields():
    raw = (
        ": keep-alive\r\n\r\n"
        "event: message\r\nid: 7\r\ndata: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"He\"}}]}\r\n\r\n"
        "data:{\"choices\": [{\"index\": 0,\r\ndata: \"delta\": {\"content\": \"llo\"}, \"finish_reason\": \"stop\"}]}\n\n"
        "data: [DONE]\n\n"
    )
    chunks = parse_sse(raw)
    assert len(chunks) == 2 and assemble(chunks) == ("Hello", "stop", None)
    with pytest.raises(LifecycleError):
        parse_sse("data: {not json}\n\n")


def test_stream_problems_catches_broken_streams(paris):
    _, events, _ = paris
    chunks = [e.data for e in events[:-1]]
    doubled = chunks[:-1] + [chunks[-2]] + chunks[-1:]
    assert "finish_reason is not set exactly once, in the last choice chunk" in stream_problems(doubled)
    assert "first delta is not role-only" in stream_problems(chunks[1:])
    assert "id is not constant" in stream_problems(chunks + [{**chunks[-1], "id": "other"}])
