"""The whole journey on the real model: every stage present, consistent with the others, timed."""

import numpy as np
import pytest

from lifecycle.errors import LifecycleError
from lifecycle.journey import MAX_JOURNEY_TOKENS, JourneyInput, run_journey
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.stages.streaming import assemble, parse_sse

GREEDY = SamplingSettings(temperature=0.0)


@pytest.fixture(scope="module")
def journey(loaded):
    return run_journey(JourneyInput("Name one primary colour.", sampling=GREEDY, max_tokens=8), loaded)


def test_usage_counts_the_rendered_prompt_and_the_generated_steps(journey):
    usage = journey.response["usage"]
    assert usage["prompt_tokens"] == len(journey.rendered.ids) == journey.budget.prompt_tokens
    assert usage["completion_tokens"] == len(journey.generation.steps)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_the_stream_reassembles_to_the_response(journey):
    chunks = parse_sse("".join(event.sse for event in journey.stream))
    text, finish_reason, usage = assemble(chunks)
    message = journey.response["choices"][0]
    assert text == message["message"]["content"] == journey.generation.text
    assert finish_reason == message["finish_reason"] == journey.generation.finish_reason
    assert usage == journey.response["usage"]
    assert {c["id"] for c in chunks} == {journey.response["id"]}


def test_greedy_first_token_is_the_inspection_pass_argmax(journey):
    assert journey.generation.steps[0].token_id == int(np.argmax(journey.next_token.probs))
    assert journey.sampled.greedy and journey.sampled.kept == 1


def test_budget_segments_add_up_to_the_prompt(journey):
    assert sum(s.tokens for s in journey.budget.segments) == len(journey.rendered.ids)
    assert journey.budget.output_reserve == 8


def test_timings_cover_every_stage_with_prefill_and_each_decode_step_apart(journey):
    stages = [t.stage for t in journey.timings]
    for stage in ("request", "tokenization", "chat template", "inspection pass", "prefill", "detokenization"):
        assert stage in stages
    decode = [s for s in stages if s.startswith("decode ")]
    assert len(decode) == len(journey.generation.steps)
    assert all(t.seconds >= 0 for t in journey.timings)
    prefill = next(t for t in journey.timings if t.stage == "prefill")
    assert prefill.seconds == journey.generation.prefill_seconds > 0


def test_detokenized_steps_match_the_generated_ids(journey):
    assert [d.token_id for d in journey.detokenized] == journey.generation.token_ids
    assert "".join(d.emitted for d in journey.detokenized) == journey.generation.text


def test_small_max_tokens_ends_with_length(loaded):
    short = run_journey(JourneyInput("Tell me a long story about dragons.", sampling=GREEDY, max_tokens=2), loaded)
    assert short.generation.finish_reason == "length"
    assert short.response["choices"][0]["finish_reason"] == "length"
    assert short.response["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize(
    "inp, param",
    [
        (JourneyInput("   "), "prompt"),
        (JourneyInput("hi", max_tokens=0), "max_tokens"),
        (JourneyInput("hi", sampling=SamplingSettings(top_p=0.0)), "top_p"),
        (JourneyInput("word " * 1500), "prompt"),
    ],
)
def test_bad_input_is_a_clean_error_naming_the_parameter(loaded, inp, param):
    with pytest.raises(LifecycleError) as error:
        run_journey(inp, loaded)
    assert error.value.param == param


def test_prompt_over_the_window_is_context_length_exceeded(loaded):
    with pytest.raises(LifecycleError) as error:
        run_journey(JourneyInput("hello " * 300, max_tokens=100, window=256), loaded)
    assert error.value.code == "context_length_exceeded"


def test_the_journey_limit_is_below_the_window(loaded):
    assert MAX_JOURNEY_TOKENS < loaded.context_window


def test_the_journeys_total_is_the_calls_stages_and_the_inspection_pass_stands_apart(journey):
    inspection = [t.seconds for t in journey.timings if t.stage == "inspection pass"]
    assert len(inspection) == 1 and inspection[0] > 0
    assert journey.inspection_seconds == inspection[0]
    assert journey.total_seconds == pytest.approx(sum(t.seconds for t in journey.timings) - inspection[0])
