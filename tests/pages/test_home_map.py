"""The journey map's helpers, called as plain functions: a page is a module, so its pieces are testable
without a script run."""

import pytest

from lifecycle.features.call_timeline import HANDOVER, LAST_FRAMES, SETUP, WAIT, Span
from lifecycle.journey import run_journey
from ui.settings import JourneySettings
from views import home


def _spans(decode_steps: int) -> list[Span]:
    spans, at = [], 0.0
    for stage in (SETUP, WAIT, "prefill", HANDOVER, *(f"decode {i}" for i in range(1, decode_steps + 1)), LAST_FRAMES):
        seconds = 0.001 * (len(spans) + 1)
        spans.append(Span(stage, at, seconds))
        at += seconds
    return spans


def test_decode_steps_past_the_drawn_ones_are_folded_into_one_bar_after_them():
    steps = home.DECODE_BARS + 6
    spans = _spans(steps)
    bars, phases, folded = home.journey_bars(spans)
    assert folded == 6 and len(bars) == len(spans) - 6 + 1
    labels = [label for label, _ in bars]
    at = labels.index(f"decode {home.DECODE_BARS}") + 1
    assert labels[at] == f"decode {home.DECODE_BARS + 1}–{steps}" and labels[at + 1] == LAST_FRAMES
    folded_spans = [s for s in spans if s.stage.startswith("decode ") and int(s.stage.split()[1]) > home.DECODE_BARS]
    assert bars[at][1] == pytest.approx(sum(s.seconds for s in folded_spans))
    assert sum(seconds for _, seconds in bars) == pytest.approx(sum(s.seconds for s in spans))
    assert phases[at] == "Back to the client" and phases[0] == "The client and the API"
    assert phases[labels.index(WAIT)] == "Waiting for the engine" and phases[labels.index("prefill")] == "Inside the model"


def test_a_short_answer_is_drawn_step_by_step():
    spans = _spans(home.DECODE_BARS)
    bars, _, folded = home.journey_bars(spans)
    assert folded == 0 and bars == [(s.stage, s.seconds) for s in spans]


def test_each_stage_line_states_this_runs_own_figures(loaded):
    journey = run_journey(JourneySettings(prompt="Name a colour.", max_tokens=5).journey_input(), loaded)
    lines = home.stage_lines(journey, loaded)
    assert lines["tokenization"].startswith(f"{journey.prompt_tokens.count} tokens in ")
    assert f"{loaded.num_layers} layers × {loaded.num_heads} heads" in lines["attention"]
    assert f"Decode: {len(journey.generation.steps)} tokens" in lines["generation"]
    assert f"of {loaded.vocab_size:,} tokens left in play" in lines["sampling"]
    assert lines["streaming"].startswith(f"{len(journey.stream)} SSE events")
