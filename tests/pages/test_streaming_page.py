"""Streaming page: the recorded frames, their timing figures, the live stream and the usage chunk."""

import json

import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.streaming import delta_content, event_data, frame_kind
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import markdowns

PROMPT = "Say hi."
MAX_TOKENS = 3


@pytest.fixture(scope="module")
def page(loaded):
    from tests.pages.harness import run_page

    return run_page("streaming", prompt=PROMPT, temperature=0, max_tokens=MAX_TOKENS)


def _frames(app):
    return next(frame.value for frame in app.dataframe if "Kind" in frame.value.columns)


def _wire_deltas(app) -> list[str]:
    """The content deltas of the recorded stream, read from the raw SSE the page prints."""
    wire = next(code.value for code in app.code if code.value.startswith("data: {"))
    frames = [frame for frame in wire.split("\n\n") if frame.strip()]
    return [delta_content(event_data(frame)) for frame in frames if frame_kind(frame + "\n\n") == "content"]


def _chart(app, key):
    return json.loads(next(c for c in app.get("plotly_chart") if c.proto.id.endswith(key)).proto.spec)


def test_recorded_frames_follow_the_streaming_protocol(page):
    assert not page.exception and not page.error
    frames = _frames(page)
    assert list(frames["Kind"]) == ["role", *["content"] * MAX_TOKENS, "finish", "usage", "done"]
    assert list(frames["At (ms)"]) == sorted(frames["At (ms)"])
    wire = next(code.value for code in page.code if code.value.startswith("data: {"))
    assert wire.count("data: ") == len(frames) and wire.rstrip("\n").endswith("\n\ndata: [DONE]")
    usage = next(j for j in page.json if "prompt_tokens" in str(j.value))
    assert json.loads(usage.value)["usage"] == {
        "prompt_tokens": len(render_prompt(Conversation(new_message=PROMPT)).ids),
        "completion_tokens": MAX_TOKENS,
        "total_tokens": len(render_prompt(Conversation(new_message=PROMPT)).ids) + MAX_TOKENS,
    }


def test_ttft_and_gaps_are_the_frames_own_timestamps(page):
    frames = _frames(page)
    content_at = list(frames[frames["Kind"] == "content"]["At (ms)"])
    metrics = {m.proto.label: m.proto.body for m in page.get("metric")}
    assert float(metrics["Time to first token"].removesuffix(" ms").replace(",", "")) == pytest.approx(content_at[0], abs=1)
    gaps = _chart(page, "gaps")["data"][0]["y"]
    assert gaps == pytest.approx([b - a for a, b in zip(content_at, content_at[1:])], abs=0.2)
    timeline = {t["name"]: t for t in _chart(page, "timeline")["data"]}
    assert timeline["content"]["x"] == pytest.approx(content_at, abs=0.1)


def test_stream_it_live_streams_the_same_greedy_answer(page):
    deltas = _wire_deltas(page)
    assert [d for d in _frames(page)["Content delta"] if d] == [show_token(d) for d in deltas]
    recorded = "".join(deltas)
    button = next(b for b in page.button if b.label == "Stream it live")
    app = button.click().run()
    assert not app.exception and not app.error
    # the streaming and the non-streaming panel, and the guardrail's stream (nothing blocked)
    assert [t.value for t in app.text].count(recorded) == 3
    assert any("Nothing at all for" in c.value for c in app.caption)
    response = next(body for body in (json.loads(j.value) for j in app.json) if body.get("object") == "chat.completion")
    assert response["object"] == "chat.completion" and response["choices"][0]["message"]["content"] == recorded


def test_without_include_usage_there_is_no_usage_chunk(loaded):
    from tests.pages.harness import run_page

    app = run_page("streaming", prompt=PROMPT, temperature=0, max_tokens=2, include_usage=False)
    assert not app.exception and not app.error
    assert list(_frames(app)["Kind"]) == ["role", "content", "content", "finish", "done"]
    assert any("no usage chunk" in i.value for i in app.info)


def test_lesson_counts_the_frames_drawn_in_the_table(page):
    import re

    frames = _frames(page)
    lesson = next(m for m in markdowns(page) if "server-sent events" in m)
    assert f"**{len(frames)} server-sent events**" in lesson
    assert f"**{MAX_TOKENS} content deltas**" in lesson and ", a usage chunk" in lesson
    assert f"the prefill of {len(render_prompt(Conversation(new_message=PROMPT)).ids)} prompt tokens" in lesson
    ttft = float(re.search(r"reached the client after \*\*([\d,.]+) ms\*\*", lesson).group(1).replace(",", ""))
    assert ttft == pytest.approx(frames[frames["Kind"] == "content"]["At (ms)"].iloc[0], abs=1)


def test_the_guardrail_ends_the_stream_before_a_blocked_phrase(loaded):
    from lifecycle.stages.context_window import render_messages
    from lifecycle.stages.generation import generate
    from lifecycle.stages.sampling import SamplingSettings
    from tests.pages.harness import run_page

    question = "Write one sentence about the sea."
    app = run_page("streaming", prompt=question, temperature=0, max_tokens=24)
    assert not app.exception and not app.error
    assert "no blocked phrase appeared" in " ".join(m for m in markdowns(app))
    ids = render_messages([{"role": "user", "content": question}]).ids
    generation = generate(loaded, ids, SamplingSettings(temperature=0), 24)
    free = generation.text
    assert f"µs per token here (run over this answer's {len(generation.steps)} tokens)" in \
        " ".join(c.value for c in app.caption)
    word = max(free.split()[len(free.split()) // 3:], key=len).strip(".,;:!?")
    app.text_area(key="guardrail_block").set_value(f"{word.upper()}\n").run()
    assert not app.exception and not app.error
    kept = free[: free.lower().index(word.lower())]
    text = " ".join(m for m in markdowns(app))
    assert f"ended after **{len(kept):,} of the {len(free):,} characters**" in text
    assert "finish_reason **content_filter**" in text
    assert kept.rstrip() in [t.value.rstrip() for t in app.text]
    wire = next(c.value for c in app.code if '"finish_reason":"content_filter"' in c.value.replace(" ", ""))
    assert word.lower() not in wire.lower()
    app.text_area(key="guardrail_block").set_value("   \n").run()
    assert "the block list is empty" in app.error[0].value
