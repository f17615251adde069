"""The guardrail: a block list checked on the output, ending an answer with content_filter in the
engine's generation, and on the API (plain and streamed) when a request opts in."""

from __future__ import annotations

import openai
import pytest

from lifecycle.stages.context_window import render_messages
from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import Generation, generate_steps
from lifecycle.features.guardrail import MAX_PHRASE_CHARS, MAX_PHRASES, parse_guardrail
from lifecycle.stages.sampling import SamplingSettings
from tests.sdk_server import api_server, base_url, sdk  # noqa: F401  (fixtures: this module's own server)

MESSAGES = [{"role": "user", "content": "Write one sentence about the sea."}]
GREEDY = SamplingSettings(temperature=0.0)
MAX_TOKENS = 24


@pytest.mark.parametrize(
    ("value", "param"),
    [(["x"], "guardrail"), ({"block": "x"}, "guardrail.block"), ({"block": []}, "guardrail.block"),
     ({"block": ["ok", "  "]}, "guardrail.block"), ({"block": ["x" * (MAX_PHRASE_CHARS + 1)]}, "guardrail.block"),
     ({"block": ["x"] * (MAX_PHRASES + 1)}, "guardrail.block"), ({"block": ["x"], "allow": []}, "guardrail")],
)
def test_a_malformed_block_list_is_refused_naming_the_parameter(value, param):
    with pytest.raises(LifecycleError) as caught:
        parse_guardrail(value)
    assert caught.value.param == param


def test_a_phrase_is_found_in_any_case_and_its_beginning_held_back():
    guard = parse_guardrail({"block": ["Blue whale"]})
    assert guard.first_match("the BLUE WHALE sings") == 4 and guard.first_match("a blue car") is None
    assert guard.held("we saw a blue wh") == len("blue wh") and guard.held("we saw a car") == 0


def _free_answer(loaded) -> tuple[str, str]:
    """The model's own answer without a guardrail, and a word from its middle to block (upper-cased)."""
    ids = render_messages(MESSAGES).ids
    steps = list(generate_steps(loaded, ids, GREEDY, MAX_TOKENS))
    text = Generation.collect(ids, steps, 0.0).text
    words = [w.strip(".,;:!?\"'") for w in text.split()]
    word = max(words[len(words) // 3:], key=len)
    assert len(word) >= 3, text
    return text, word.upper()


def test_the_generation_ends_with_content_filter_where_the_phrase_starts(loaded):
    text, phrase = _free_answer(loaded)
    ids = render_messages(MESSAGES).ids
    steps = list(generate_steps(loaded, ids, GREEDY, MAX_TOKENS, guardrail=parse_guardrail({"block": [phrase]})))
    guarded = Generation.collect(ids, steps, 0.0)
    assert guarded.finish_reason == "content_filter"
    assert guarded.text == text[: text.lower().index(phrase.lower())]
    assert phrase.lower() not in "".join(step.delta for step in steps).lower()


def test_the_api_opts_in_plain_and_streamed(sdk, loaded):  # noqa: F811
    text, phrase = _free_answer(loaded)
    kept = text[: text.lower().index(phrase.lower())]
    kwargs = dict(model=loaded.name, messages=MESSAGES, temperature=0, max_tokens=MAX_TOKENS,
                  extra_body={"guardrail": {"block": [phrase]}})
    choice = sdk.chat.completions.create(**kwargs).choices[0]
    assert (choice.finish_reason, choice.message.content) == ("content_filter", kept)
    chunks = list(sdk.chat.completions.create(**kwargs, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == kept and phrase.lower() not in streamed.lower()
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["content_filter"]
    # without opting in, the same request answers in full
    free = sdk.chat.completions.create(model=loaded.name, messages=MESSAGES, temperature=0, max_tokens=MAX_TOKENS)
    assert free.choices[0].message.content == text and free.choices[0].finish_reason != "content_filter"
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(**(kwargs | {"extra_body": {"guardrail": {"block": []}}}))
    assert caught.value.param == "guardrail.block"


def test_the_responses_api_opts_in_plain_and_streamed(sdk, loaded):  # noqa: F811
    text, phrase = _free_answer(loaded)
    kept = text[: text.lower().index(phrase.lower())]
    kwargs = dict(model=loaded.name, input=MESSAGES[-1]["content"], temperature=0, max_output_tokens=MAX_TOKENS,
                  extra_body={"guardrail": {"block": [phrase]}})
    response = sdk.responses.create(**kwargs)
    assert (response.status, response.incomplete_details.reason) == ("incomplete", "content_filter")
    assert response.output_text == kept and response.output[0].status == "incomplete"
    with sdk.responses.stream(**kwargs) as stream:  # its get_final_response wants response.completed, as OpenAI's
        events = list(stream)
    streamed = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert streamed == kept and phrase.lower() not in streamed.lower()
    last = events[-1]
    assert last.type == "response.incomplete" and last.response.incomplete_details.reason == "content_filter"
    assert last.response.output_text == kept
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(**(kwargs | {"extra_body": {"guardrail": {"block": ["x"] * (MAX_PHRASES + 1)}}}))
    assert caught.value.param == "guardrail.block" and f"at most {MAX_PHRASES} phrases" in caught.value.message
