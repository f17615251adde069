"""Every number the Generation page states, for two prompts, against an independent recomputation.

The page runs under AppTest at temperature 0; this file recomputes its numbers without the page's helpers
or the app's engine: the prompt with the tokenizer's own ``apply_chat_template``, the answer with
transformers' own ``generate`` on the loaded model (greedy, raw logits returned), each step's
probabilities with a softmax of those logits, the text with the tokenizer's ``decode``, and every
mean, minimum and finish reason by plain arithmetic on those numbers.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.pages.harness import markdowns, run_page
from tests.pages.recompute import template_ids, transformers_greedy
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
MAX_TOKENS = 30
# The engine multiplies the GGUF's packed codes, transformers the same weights in fp32: the same numbers up to
# float rounding, so a probability may differ in its last printed digit.
PROBABILITY_ABS = 2e-3






@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky"])
def generation(request, loaded):
    prompt = request.param
    app = run_page("generation", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    assert not app.exception and not app.error
    ids = template_ids(loaded, prompt)
    new, probs = transformers_greedy(loaded, ids, MAX_TOKENS)
    return app, ids, new, probs


def _lesson(app) -> str:
    return next(m for m in markdowns(app) if "one token per step" in m)


def _table(app):
    return next(frame.value for frame in app.dataframe if "Model's probability (T=1)" in frame.value.columns)


def _replay(app) -> dict:
    (replay,) = [c for c in app.get("bidi_component") if "generation_replay" in c.proto.id]
    return json.loads(replay.proto.json)


def _percent(text: str) -> float:
    return float(text.removesuffix("%")) / 100


def test_the_tokens_are_transformers_own_greedy_answer(generation, loaded):
    app, ids, new, _ = generation
    table = _table(app)
    assert list(table["Id"]) == new
    lesson = _lesson(app)
    assert f"one token per step: {len(new)} tokens**" in lesson
    assert f"one pass over the **{len(ids):,} prompt tokens**" in lesson
    answer = "".join(_replay(app)["deltas"])
    assert answer == reference_tokenizer(loaded).decode(new, skip_special_tokens=True)


def test_why_it_stopped_is_what_the_last_token_was(generation, loaded):
    app, _, new, _ = generation
    eos = {reference_tokenizer(loaded).convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
    lesson = _lesson(app)
    if new[-1] in eos:
        assert "finish_reason **stop**" in lesson
        assert any(f"Step {len(new)} chose an end-of-sequence token (id {new[-1]}," in s.value for s in app.success)
    else:
        assert len(new) == MAX_TOKENS
        assert f"it reached max_tokens = {MAX_TOKENS} (finish_reason **length**)" in lesson
        assert any(f"max_tokens = {MAX_TOKENS}" in w.value for w in app.warning)


def test_each_steps_probabilities_are_the_models_softmax(generation):
    app, _, new, probs = generation
    table = _table(app)
    chosen = probs[np.arange(len(new)), new]
    shown = np.array([_percent(p) for p in table["Model's probability (T=1)"]])
    np.testing.assert_allclose(shown, chosen, atol=PROBABILITY_ABS)
    assert all(_percent(p) == 1.0 for p in table["Probability"])  # greedy: the top token is drawn with certainty
    replay = _replay(app)
    np.testing.assert_allclose(replay["base"], chosen, atol=PROBABILITY_ABS / 10)
    assert replay["p"] == [1.0] * len(new)
    for step, rows in enumerate(replay["alternatives"]):
        top = np.argsort(-probs[step], kind="stable")[:len(rows)]
        np.testing.assert_allclose([row[2] for row in rows], probs[step][top], atol=PROBABILITY_ABS / 10)
        assert [row[3] for row in rows] == [1] + [0] * (len(rows) - 1)  # greedy: the chosen one is the most likely


def test_the_times_it_states_are_the_tables_arithmetic(generation):
    app, ids, new, _ = generation
    table = _table(app)
    lesson = _lesson(app)
    mean = float(re.search(r"each step took \*\*([\d,.]+) ms\*\* on average", lesson).group(1).replace(",", ""))
    # The table rounds each time to 0.1 and the lesson rounds the mean to 0.1: 0.05 of slack for each.
    assert mean == pytest.approx(sum(table["Time (ms)"]) / len(table), abs=0.1)
    assert _replay(app)["ms"] == list(table["Time (ms)"])
    prefill = float(re.search(r"\(the prefill, ([\d,.]+) ms\)", lesson).group(1).replace(",", ""))
    said = [re.search(r"\(([\d,]+) ms for the (\d+) prompt tokens\)", c.value) for c in app.caption]
    said = [m for m in said if m]
    assert said and int(said[0].group(2)) == len(ids)
    assert float(said[0].group(1).replace(",", "")) == pytest.approx(prefill, abs=0.55)  # whole ms vs 0.1 ms


def test_the_least_likely_token_is_the_minimum_logprob(generation):
    app, _, new, probs = generation
    content = np.log(probs[np.arange(len(new)), new])  # every step the figure above the caption colours
    caption = next(c.value for c in app.caption if "The least likely token here" in c.value)
    found = re.search(r"had logprob (-?[\d.]+) \(p = ([\d.]+)%\) at step (\d+)", caption)
    assert found, caption
    assert float(found.group(1)) == pytest.approx(content.min(), abs=0.011)
    assert int(found.group(3)) == int(np.argmin(content)) + 1
