"""Generation page charts, built from a real greedy generation on the model."""

import plotly.io as pio
import pytest

from charts.generation import CHOSEN, OTHER, PICKED, alternatives_figure, steps_figure
from charts.sampling import token_label
from lifecycle.stages.generation import generate
from lifecycle.stages.sampling import SamplingSettings


@pytest.fixture(scope="module")
def run(loaded):
    ids = loaded.tokenizer("The capital of France is", add_special_tokens=False)["input_ids"]
    return generate(loaded, ids, SamplingSettings(temperature=0.8, seed=7), 4)


def test_alternatives_bars_are_the_step_candidates_with_the_chosen_highlighted(run):
    step = run.steps[1]
    figure = alternatives_figure(step)
    bar = figure.data[0]
    assert list(bar.x) == [c.probability for c in step.alternatives]
    assert list(bar.y) == [f"{c.rank}. {token_label(c.text)}" for c in step.alternatives]
    chosen = [c.id == step.token_id for c in step.alternatives]
    assert chosen.count(True) == 1
    assert list(bar.marker.color) == [CHOSEN if c else OTHER for c in chosen]
    assert figure.layout.xaxis.title.text == "Probability after sampling (%)"
    assert pio.to_json(figure)


def test_steps_figure_plots_probability_and_milliseconds_per_step(run):
    figure = steps_figure(run.steps, picked={2})
    probability, time = figure.data
    assert list(probability.x) == [1, 2, 3, 4]
    assert list(probability.y) == [s.probability for s in run.steps]
    assert list(time.y) == pytest.approx([s.seconds * 1000 for s in run.steps])
    assert list(probability.marker.color) == [CHOSEN, CHOSEN, PICKED, CHOSEN]
    assert figure.layout.yaxis2.title.text == "Time (ms)"
    assert figure.layout.xaxis2.title.text == "Step (generated token number)"
    assert list(steps_figure(run.steps[:1], total=4).layout.xaxis.range) == [0.5, 4.5]
